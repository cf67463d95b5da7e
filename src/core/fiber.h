/*
 * The fiber lifecycle's interface for the scheduler's lifecycle (fiber.c):
 * waiting until no fiber is alive, and releasing outside waiters.
 */
#ifndef USCHED_CORE_FIBER_H
#define USCHED_CORE_FIBER_H

#include <stdbool.h>

struct usched;

/* Waits until every fiber of s has exited: 0, or with detect_deadlock
 * -EDEADLK when the fibers left are all blocked with nothing to wake them. */
int usched__wait_live(struct usched *s, bool detect_deadlock);
/* Releases every outside thread blocked in usched_join or usched_wait
 * with -ECANCELED (a scheduler destroyed in a deadlock). */
void usched__cancel_owaiters(struct usched *s);

#endif
