/*
 * The idle path (steal.c): the global queue, stealing, spinning, and the
 * decision to park (park.c parks).
 */
#ifndef USCHED_CORE_STEAL_H
#define USCHED_CORE_STEAL_H

#include "core/park.h"

/* Idle CPUs may steal: the policy lets them and knob steal is on. */
bool usched__may_steal(struct usched *s);
/* The oldest fiber of the global queue, unless the smt rule leaves it to a
 * whole idle core (D1-D4); NULL when there is none to take. */
struct usched_task *usched__gq_pull(struct usched *s, struct usched__wk *w);
/* One steal round in the policy's order; last_pass may take a victim's
 * next slot. NULL: nothing taken. */
struct usched_task *usched__steal(struct usched *s, struct usched__wk *w, bool last_pass);
/* Anything w could run or steal (the parking re-check, P3)? */
bool usched__work_visible(struct usched *s, struct usched__wk *w);
/* The idle path of a worker that found nothing local (published idle):
 * steal, spin, park until a fiber comes; NULL when the scheduler stops. */
struct usched_task *usched__find_idle(struct usched *s, struct usched__wk *w);

#endif
