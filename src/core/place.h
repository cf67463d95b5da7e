/*
 * The placement referee (place.c): asks the policy where a fiber goes,
 * checks and counts the answer.
 */
#ifndef USCHED_CORE_PLACE_H
#define USCHED_CORE_PLACE_H

#include <stdint.h>

#include "usched.h"
#include "usched/policy.h"

struct usched;
struct usched__wk;
struct usched_task;

/* Places t (a spawn or a wake-up), decided on `self`: the calling thread's
 * worker of s, or NULL from outside (or from a worker of another scheduler). */
void usched__place_on(struct usched *s, struct usched__wk *self, struct usched_task *t, unsigned flags);
/* A fiber's spawn under a policy that declares its answer
 * (USCHED_OPS_FORK_NEXT): the spawner's next slot. */
void usched__place_fork(struct usched *s, struct usched__wk *self, struct usched_task *t);
void usched__task_info_fill(const struct usched_task *t, struct usched_task_info *ti,
                            uint32_t flags);
/* The home of descriptor fd (io_poller=percpu), asked on me, the waiting
 * fiber's worker: the policy's io_home answer, else the core's rule (the
 * packet's CPU when known, else me's). flags: USCHED_HOME_*; home: its home
 * now, -1 when new. */
int usched__place_home(struct usched *s, struct usched__wk *me, int fd, unsigned flags, int packet, int home);
/* Reports, once per scheduler, a policy answer or query the core could not
 * use (the core then falls back). */
void usched__pol_warn(struct usched *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Why a fiber wakes up (usched__wake's flags). They have the values of the
 * matching USCHED_SEL_* flags of include/usched/policy.h (asserted in
 * core/place.c), which the core passes on to the policy's select_cpu. */
enum {
    USCHED__WAKE_SYNC = 0x4,  /* the waker is about to block (a hand-off) */
    USCHED__WAKE_EXIT = 0x20, /* with SYNC: the waker is exiting, its CPU frees now */
    USCHED__WAKE_IO = 0x40,   /* the fiber's file descriptor became ready */
};

/* Makes a blocked fiber runnable, placing it through the policy.
 * flags: USCHED__WAKE_*. Callable from fibers, workers' host contexts
 * (timers, the I/O poller) and outside threads. */
void usched__wake(usched_task_t *t, unsigned flags);

/* Near wake-ups (knob near_wake): of the fibers waiting for one thing, the
 * one to hand a message to is the one that last ran nearest the caller's
 * CPU. A waker looks up its CPU once (usched__near_cpu: cpu -1 when the
 * knob is off or the caller is not a fiber, and then there is nothing to
 * prefer), measures candidates with usched__near_dist and, when it passes
 * over a longer waiter for a nearer one, counts it with usched__near_taken
 * (both only with a near_cpu that gave a CPU: wk is then the caller's
 * worker, and the count is its own). */
struct usched__wk;
typedef struct usched__near {
    struct usched__wk *wk;
    int cpu;
} usched__near_t;
usched__near_t usched__near_cpu(void);
/* 0: t last ran on n's CPU; 1 + the lowest topology level the two CPUs
 * share (USCHED_LVL_*) otherwise; USCHED__NEAR_FAR for an outside thread's
 * waiter (t NULL), a fiber of another scheduler or one that never ran. */
enum { USCHED__NEAR_FAR = 1 << 16 };
int usched__near_dist(usched__near_t n, const usched_task_t *t);
void usched__near_taken(usched__near_t n);

#endif
