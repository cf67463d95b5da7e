/*
 * Preemption (docs/preempt.md): the stall monitor asks a worker whose fiber
 * has run longer than the knob preempt_us, while other work waits for its
 * CPU, to give the CPU up. It queues the preemption signal (knob
 * preempt_sig) to that worker's thread; the handler (preempt_sig.c) yields
 * the fiber from inside the handler when the interrupted place is safe
 * (P1-P4 there), and the signal frame the kernel wrote on the fiber's stack
 * keeps every register, the FP/SIMD state and the signal mask until the
 * fiber is resumed, on whichever worker the policy picks, and returns
 * through it.
 */
#ifndef USCHED_CORE_PREEMPT_H
#define USCHED_CORE_PREEMPT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct usched;
struct usched__wk;

#define USCHED__PREEMPT_MAGIC 0x70726565u /* "pree": a live per-CPU slot */

/* What the handler made of a request (slot.verdict). */
enum { PREEMPT_NONE = 0, PREEMPT_TAKEN, PREEMPT_OFF, PREEMPT_LOCK, PREEMPT_UNSAFE, PREEMPT_GONE };

/* One CPU's preemption slot. The monitor writes req (release) before it
 * sends the signal; the handler takes it with an exchange and stores its
 * verdict (relaxed: a hint for the monitor's back-off). The pointer
 * travels in the signal's value, so the handler needs no thread-local. */
struct usched__preempt_cpu {
    uint32_t magic;            /* USCHED__PREEMPT_MAGIC; read-only after start */
    struct usched__wk *w;      /* read-only after start */
    _Atomic uint64_t req;      /* fiber id asked to yield, 0 none */
    _Atomic uint32_t verdict;  /* the handler's last PREEMPT_* */
    _Atomic uintptr_t last_pc; /* where the last preemption interrupted (tests) */
    /* monitor only: the back-off after refusals (preempt.c, R1) */
    uint64_t last_id;          /* the fiber last looked at */
    bool asked;                /* it was asked; its verdict is not read yet */
    uint32_t refusals, wait;   /* refusals in a row; looks to wait */
    int stat_fd;               /* the worker's /proc/self/task/TID/stat (R3), -1 not open */
} __attribute__((aligned(64)));

struct usched__preempt {
    int sig;
    uint64_t ns;               /* preempt_us in ns, resolved at start (> 0) */
    const char *source;        /* where the slice comes from (docs, usched knobs) */
    struct usched__preempt_cpu *cpu; /* [ncpus] */
    uint64_t run_max_ns;       /* monitor only: the longest run seen */
};

/* At start, before the monitor: resolves preempt_us (the policy's slice
 * when -1) and, unless it is 0, installs the handler for preempt_sig. 0, or
 * a negative errno with the reason in usched_last_error (-EBUSY: the
 * program has a handler of its own for that signal; -EINVAL: a signal that
 * cannot be used). */
int usched__preempt_start(struct usched *s);
/* Frees what start allocated, once every worker has stopped (a signal sent
 * to a worker is delivered or dropped with its thread). */
void usched__preempt_stop(struct usched *s);
/* The monitor's look period for preemption, 0 when it is off. */
uint64_t usched__preempt_period_ns(const struct usched *s);
/* One look of the monitor at CPU c, whose fiber id has run for ran_ns
 * without a scheduling point: asks it to yield if other work waits for its
 * CPU (R1-R2 in preempt.c). */
void usched__preempt_look(struct usched *s, int c, uint64_t id, uint64_t ran_ns, uint64_t now);
/* Notes a run of ran_ns for run_max_us (monitor only). */
void usched__preempt_run_seen(struct usched *s, uint64_t ran_ns);

/* The built-in policy's slice in microseconds and its source; the usched
 * default for any other policy. */
int64_t usched__preempt_slice_us(const char *policy, int ncpus, const char **source);

/* preempt_sig.c: installs the handler for sig once per process (a handler
 * of the program's own there: -EBUSY) and caches the program's code ranges. */
int usched__preempt_sig_install(int sig);

/* sched.c: the running fiber of w leaves its CPU as a yield does, looking
 * at due timers and ready I/O first (called from the signal handler). */
void usched__preempt_leave(struct usched__wk *w);

#endif
