/*
 * Preemption, the monitor's side (docs/preempt.md; the handler and its
 * safety rule P1-P4 are in preempt_sig.c).
 *
 * The knob preempt_us is resolved at start: -1 (the default) takes the
 * policy's own kernel slice (slice_of), 0 turns preemption off and
 * installs nothing. The stall monitor then looks every preempt_us / 2 (or
 * stall_us / 2, whichever is shorter; monitor.c) and, for each worker
 * whose fiber has run preempt_us without a scheduling point:
 *   R1. asks only when no request is in flight (req is 0: the handler took
 *       the last one) and, after a refusal for the same fiber, only after
 *       1, 3 or 7 looks: a fiber that stays in unsafe places (a long
 *       libc call, a blocking system call, preemption off) is not sent a
 *       signal on every look, and a system call that cannot restart
 *       (epoll_wait, nanosleep) is not interrupted on every look;
 *   R2. asks only when other work waits for that CPU: its run queue, next
 *       slot, inbox or bound fibers hold a fiber, the global queue does, or
 *       one of its timers is due. A fiber alone on its CPU runs on.
 *   R3. asks only when the worker's thread is not asleep in the kernel: a
 *       fiber blocked in a system call is not running its code, and the
 *       signal would only cut the call short (EINTR). The thread may still
 *       enter a call between this look and the signal.
 * Asking is storing the fiber's id in the CPU's slot (release) and queueing
 * the signal to the worker's thread (rt_tgsigqueueinfo) with the slot's
 * address as its value; the handler's exchange (acquire) takes the id.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/error.h"
#include "base/export.h"
#include "base/fault.h"
#include "core/core.h"
#include "core/preempt.h"

#define PREEMPT_PERIOD_MIN_NS 20000ull /* the monitor's shortest look for preemption */
/* R1: at most 2^3 - 1 = 7 looks skipped between asks. Not more: a fiber of
 * a ThreadSanitizer build spends most of its time in the sanitizer's
 * runtime, where every ask is refused (core_preempt's loop: 463 of 494
 * asks refused, and with up to 63 looks skipped its 50 sleeps did not end
 * in 20 s). */
#define PREEMPT_BACKOFF_MAX 3

/* Each built-in policy's slice, as its kernel sets it (docs/preempt.md). */
int64_t usched__preempt_slice_us(const char *policy, int ncpus, const char **source)
{
    if (!strcmp(policy, "linux")) {
        /* EEVDF's base slice, 0.75 ms, scaled by 1 + log2(CPUs), CPUs
         * counted up to 8 (SCHED_TUNABLESCALING_LOG, the default). */
        int f = 1;
        for (int n = ncpus < 8 ? ncpus : 8; n > 1; n >>= 1) f++;
        *source = "Linux kernel/sched/fair.c: sysctl_sched_base_slice 0.75 ms x (1 + log2 CPUs, at most 8)";
        return 750 * f;
    }
    if (!strcmp(policy, "ule")) {
        *source = "FreeBSD sched_ule.c: sched_slice = stathz / 10, 12 ticks of 127 Hz";
        return 94000;
    }
    if (!strcmp(policy, "bsd4")) {
        *source = "DragonFly usched_bsd4.c: usched_bsd4_rrinterval, a tenth of a second";
        return 100000;
    }
    if (!strcmp(policy, "global")) {
        *source = "4.4BSD sched_4bsd.c: sched_quantum = hz / 10";
        return 100000;
    }
    *source = "usched: Go's forcePreemptNS, 10 ms";
    return 10000;
}

/* Signals that cannot preempt: uncatchable, job control, faults the
 * program and the sanitizers need, and those the C library keeps for
 * itself (32 up to SIGRTMIN). */
static bool sig_usable(int sig)
{
    switch (sig) {
    case SIGKILL: case SIGSTOP: case SIGTSTP: case SIGTTIN: case SIGTTOU: case SIGCONT:
    case SIGCHLD: case SIGSEGV: case SIGBUS: case SIGILL: case SIGFPE: case SIGTRAP:
    case SIGSYS: case SIGABRT:
        return false;
    default:
        return sig >= 1 && sig <= 64 && (sig < 32 || sig >= SIGRTMIN);
    }
}

int usched__preempt_start(usched_t *s)
{
    int64_t us = usched__knob_get(&s->knobs, USCHED_KNOB_preempt_us);
    const char *source = "the knob preempt_us";
    if (us < 0) us = usched__preempt_slice_us(s->ops->name, s->ncpus, &source);
    if (us == 0) return 0;
    int sig = (int)usched__knob_get(&s->knobs, USCHED_KNOB_preempt_sig);
    if (!sig_usable(sig))
        return usched__error(EINVAL, "knob preempt_sig: signal %d (%s) cannot preempt a worker: it is "
                             "uncatchable, a fault, job control, SIGCHLD, SIGABRT or kept by the C library",
                             sig, strsignal(sig));
    int rc = usched__preempt_sig_install(sig);
    if (rc == -EBUSY)
        return usched__error(EBUSY, "knob preempt_sig: signal %d (%s) already has a handler in this program; "
                             "choose a free signal with preempt_sig, or turn preemption off with preempt_us=0",
                             sig, strsignal(sig));
    if (rc < 0) return usched__error(-rc, "preempt: cannot install the handler of signal %d", sig);
    struct usched__preempt *p = usched__calloc(1, sizeof *p);
    struct usched__preempt_cpu *cpu = usched__alloc_lines((size_t)s->ncpus * sizeof *cpu);
    if (!p || !cpu) {
        free(p);
        free(cpu);
        return usched__error(ENOMEM, "preempt: out of memory");
    }
    memset(cpu, 0, (size_t)s->ncpus * sizeof *cpu);
    for (int c = 0; c < s->ncpus; c++) {
        cpu[c].magic = USCHED__PREEMPT_MAGIC;
        cpu[c].w = s->wk[c];
        cpu[c].stat_fd = -1;
    }
    p->sig = sig;
    p->ns = (uint64_t)us * 1000;
    p->source = source;
    p->cpu = cpu;
    s->pre = p;
    return 0;
}

void usched__preempt_stop(usched_t *s)
{
    struct usched__preempt *p = s->pre;
    if (!p) return;
    for (int c = 0; c < s->ncpus; c++) {
        p->cpu[c].magic = 0;
        if (p->cpu[c].stat_fd >= 0) close(p->cpu[c].stat_fd);
    }
    free(p->cpu);
    free(p);
    s->pre = NULL;
}

uint64_t usched__preempt_period_ns(const usched_t *s)
{
    if (!s->pre) return 0;
    uint64_t p = s->pre->ns / 2;
    return p < PREEMPT_PERIOD_MIN_NS ? PREEMPT_PERIOD_MIN_NS : p;
}

void usched__preempt_run_seen(usched_t *s, uint64_t ran_ns)
{
    _Atomic uint64_t *max = &s->out.stats.v[USCHED_STAT_run_max_us];
    uint64_t us = ran_ns / 1000;
    if (us > atomic_load_explicit(max, memory_order_relaxed))
        atomic_store_explicit(max, us, memory_order_relaxed); /* the monitor is its one writer */
}

/* R2: other work waits for w's CPU. */
static bool work_waits(usched_t *s, struct usched__wk *w, uint64_t now)
{
    if (usched__ring_len(&w->ring) || atomic_load_explicit(&w->next, memory_order_relaxed) ||
        atomic_load_explicit(&w->inbox_n, memory_order_relaxed) > 0 ||
        atomic_load_explicit(&w->nbound, memory_order_relaxed) ||
        atomic_load_explicit(&s->gq.n, memory_order_relaxed))
        return true;
    return usched__timers_pending(&w->timers) && usched__timers_next(&w->timers) <= now;
}

/* R3: w's thread sleeps in the kernel (state S or D in its
 * /proc/self/task/TID/stat): its fiber is blocked in a system call, where a
 * signal could only cut the call short (EINTR for nanosleep, epoll_wait,
 * calls with a timeout), never preempt. False when the file cannot be read:
 * then the monitor asks as if the thread ran. */
static bool thread_sleeps(struct usched__preempt_cpu *pc, int32_t tid)
{
    if (pc->stat_fd < 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
        pc->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
        if (pc->stat_fd < 0) return false;
    }
    char buf[512];
    ssize_t n = pread(pc->stat_fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return false;
    buf[n] = '\0';
    const char *end = strrchr(buf, ')'); /* the thread's name may hold anything but ends at the last ')' */
    return end && end[1] == ' ' && (end[2] == 'S' || end[2] == 'D');
}

void usched__preempt_look(usched_t *s, int c, uint64_t id, uint64_t ran_ns, uint64_t now)
{
    struct usched__preempt *p = s->pre;
    if (!p || ran_ns < p->ns) return;
    struct usched__preempt_cpu *pc = &p->cpu[c];
    if (atomic_load_explicit(&pc->req, memory_order_relaxed)) return; /* R1: one in flight */
    if (pc->last_id != id) pc->last_id = id, pc->asked = false, pc->refusals = 0, pc->wait = 0;
    if (pc->asked) { /* R1: the verdict on the last ask to this fiber */
        uint32_t v = atomic_load_explicit(&pc->verdict, memory_order_relaxed);
        pc->asked = false;
        if (v == PREEMPT_OFF || v == PREEMPT_LOCK || v == PREEMPT_UNSAFE) {
            if (pc->refusals < PREEMPT_BACKOFF_MAX) pc->refusals++;
            pc->wait = (1u << pc->refusals) - 1;
        } else {
            pc->refusals = 0, pc->wait = 0;
        }
    }
    if (pc->wait) {
        pc->wait--;
        return;
    }
    struct usched__wk *w = pc->w;
    int32_t tid = atomic_load_explicit(&w->tid, memory_order_acquire);
    if (!tid || !work_waits(s, w, now)) return; /* R2 */
    if (thread_sleeps(pc, tid)) { /* R3 */
        usched__stat_add_atomic(&s->out.stats, USCHED_STAT_preempt_skipped_syscall, 1);
        return;
    }
    atomic_store_explicit(&pc->verdict, PREEMPT_NONE, memory_order_relaxed);
    atomic_store_explicit(&pc->req, id, memory_order_release);
    pc->asked = true;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_signo = p->sig;
    si.si_code = SI_QUEUE;
    si.si_pid = getpid();
    si.si_uid = getuid();
    si.si_value.sival_ptr = pc;
    if (syscall(SYS_rt_tgsigqueueinfo, si.si_pid, tid, p->sig, &si) == 0)
        usched__stat_add_atomic(&s->out.stats, USCHED_STAT_preempt_signals, 1);
    else
        atomic_store_explicit(&pc->req, 0, memory_order_relaxed); /* the thread is gone (EAGAIN: retry) */
}

/* ---- the API --------------------------------------------------------------- */

static struct usched_task *self_fiber(void)
{
    struct usched__wk *w = usched__self_wk();
    return w ? w->cur : NULL;
}

USCHED_EXPORT int usched_preempt_off(void)
{
    struct usched_task *t = self_fiber();
    if (!t) return usched__error(EPERM, "preempt_off: not called from a fiber");
    uint32_t n = atomic_load_explicit(&t->preempt_off, memory_order_relaxed);
    if (n >= INT32_MAX) return usched__error(EOVERFLOW, "preempt_off: nested %u times already", n);
    atomic_store_explicit(&t->preempt_off, n + 1, memory_order_relaxed);
    return (int)n + 1;
}

USCHED_EXPORT int usched_preempt_on(void)
{
    struct usched_task *t = self_fiber();
    if (!t) return usched__error(EPERM, "preempt_on: not called from a fiber");
    uint32_t n = atomic_load_explicit(&t->preempt_off, memory_order_relaxed);
    if (!n) return usched__error(EINVAL, "preempt_on: preemption is not off (no usched_preempt_off to match)");
    atomic_store_explicit(&t->preempt_off, n - 1, memory_order_relaxed);
    if (n == 1 && atomic_exchange_explicit(&t->preempt_owed, 0, memory_order_relaxed)) {
        /* A preemption was refused meanwhile: take it now. */
        struct usched__wk *w = usched__self_wk();
        usched__stat_add(&w->stats, USCHED_STAT_preempt_deferred, 1);
        usched__preempt_leave(w);
    }
    return (int)n - 1;
}
