/*
 * The stall monitor (src/core/monitor.c, docs/monitor.md).
 *
 *   idle      the monitor sleeps once every worker parked (monitor_sleeps),
 *             and wakes when work comes (the later cases need it awake);
 *   spin      100 fibers sleep 10 ms with their timers on CPU 0, whose
 *             bound fiber then computes without yielding: every sleeper wakes
 *             before it stops computing (ordering, not a time); fibers queued
 *             behind it run elsewhere meanwhile; bound fibers queued behind
 *             it wait for it and run on CPU 0;
 *   read      the same with the fiber blocked in a plain read() on a pipe;
 *   io        a fiber of CPU 0 waiting in usched_read gets its byte while
 *             CPU 0 is held;
 *   report    with stall_warn=1 a stalled fiber is reported on stderr once
 *             (naming its id and CPU), though it stalls twice;
 *   steal     on a second scheduler, with stealing on: fibers queued behind
 *             CPU 0's computing fiber while every other CPU is parked and
 *             no wake-up is coming run elsewhere (the monitor wakes a
 *             thief: stall_wakes);
 *   trace     the trace holds one stall event per episode counted.
 * Stealing is off (steal=0) but in the steal case, so only the monitor can
 * serve CPU 0's queues; preemption is off (preempt_us=0), so CPU 0's fiber
 * keeps its CPU.
 * The computing fiber stops as soon as the outcome is known, or after 20 s
 * (a bound no correct implementation misses; without the monitor the
 * sleepers would wake only after it).
 *
 * Usage: core_monitor [topology [knobs]]   (topology "" or none: the live
 * machine; knobs added to steal=0,preempt_us=0, e.g. io_poller=shared: the
 * io case with the one set, where every look wakes a CPU while fibers wait
 * in it and no CPU holds its role, MSH in monitor.c)
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/core.h"
#include "core/sched.h"
#include "tracefmt/tracefmt.h"
#include "test.h"
#include "usched.h"

#define NSLEEP 100
#define MAX_BATCHES 50
#define NQUEUED 10
#define NBOUND 5
#define BOUND_S 20.0

static usched_t *sched;
static _Atomic int nsleep, armed, armed_cpu0, woke, woke_during, queued_during;
static int pending_cpu0; /* 1 if CPU 0's heap held timers when the hold began */
static _Atomic int bound_ran, bound_during, bound_elsewhere;
static _Atomic int holding; /* 1 while CPU 0's fiber computes or blocks */
static int mode;            /* 0 compute, 1 read() */
static int pipefd[2];

static uint64_t stat_of(const char *name)
{
    uint64_t v = 0;
    ASSERT_OK(usched_stat(sched, name, &v));
    return v;
}

static void sleeper(void *arg)
{
    (void)arg;
    bool on0 = usched_self_cpu() == 0;
    if (on0) atomic_fetch_add(&armed_cpu0, 1);
    atomic_fetch_add(&armed, 1);
    ASSERT_OK(usched_sleep_ns(10 * 1000 * 1000));
    if (atomic_load(&holding)) atomic_fetch_add(&woke_during, 1);
    atomic_fetch_add(&woke, 1);
}

static void queued(void *arg)
{
    (void)arg;
    if (atomic_load(&holding)) atomic_fetch_add(&queued_during, 1);
}

static void bound_fiber(void *arg)
{
    (void)arg;
    if (atomic_load(&holding)) atomic_fetch_add(&bound_during, 1);
    if (usched_self_cpu() != 0) atomic_fetch_add(&bound_elsewhere, 1);
    atomic_fetch_add(&bound_ran, 1);
}

static bool all_served(void)
{
    return atomic_load(&woke) == atomic_load(&nsleep) && atomic_load(&queued_during) == NQUEUED;
}

/* An outside thread: releases the blocked read() once everything ran. */
static void *releaser(void *arg)
{
    (void)arg;
    double end = test_now() + BOUND_S;
    while (!all_served() && test_now() < end) usleep(1000);
    atomic_store(&holding, 0);
    char c = 'x';
    ASSERT_EQ(write(pipefd[1], &c, 1), 1);
    return NULL;
}

/* Bound to CPU 0: lets the sleepers arm their timers here, then holds the
 * CPU (computing, or in read()) with fibers queued behind it. */
static void holder(void *arg)
{
    (void)arg;
    atomic_store(&holding, 1);
    /* Until some sleeper's timer sits in CPU 0's heap, not yet fired (a
     * shared-queue policy may run a whole batch elsewhere, and on a loaded
     * machine the yields below may pass 10 ms, so that CPU 0 fires its own
     * timers before the hold). The heap itself says so: a sleeper that has
     * not run since its timer fired still counts as asleep in the test's own
     * counters. From here to the hold this fiber does not yield, so only the
     * monitor can fire them. */
    const usched__timers_t *heap0 = &sched->wk[0]->timers;
    for (int b = 0; b < MAX_BATCHES && !usched__timers_pending(heap0); b++) {
        for (int i = 0; i < NSLEEP; i++) ASSERT_OK(usched_spawn(sched, NULL, sleeper, NULL));
        atomic_fetch_add(&nsleep, NSLEEP);
        while (atomic_load(&armed) < atomic_load(&nsleep)) usched_yield();
    }
    pending_cpu0 = (int)usched__timers_pending(heap0);
    for (int i = 0; i < NQUEUED; i++) ASSERT_OK(usched_spawn(sched, NULL, queued, NULL));
    for (int i = 0; i < NBOUND; i++) ASSERT_OK(usched_spawn_on(sched, NULL, 0, bound_fiber, NULL));
    if (mode == 0) {
        double end = test_now() + BOUND_S;
        while (!all_served() && test_now() < end) __asm__ volatile("" ::: "memory");
        atomic_store(&holding, 0);
    } else {
        pthread_t th;
        ASSERT_EQ(pthread_create(&th, NULL, releaser, NULL), 0);
        char c;
        ASSERT_EQ(read(pipefd[0], &c, 1), 1); /* a plain blocking read */
        ASSERT_EQ(pthread_join(th, NULL), 0);
    }
}

static void reset(void)
{
    atomic_store(&nsleep, 0), atomic_store(&armed, 0), atomic_store(&armed_cpu0, 0), atomic_store(&woke, 0);
    pending_cpu0 = 0;
    atomic_store(&woke_during, 0), atomic_store(&queued_during, 0);
    atomic_store(&bound_ran, 0), atomic_store(&bound_during, 0), atomic_store(&bound_elsewhere, 0);
}

static void case_hold(int m)
{
    mode = m;
    reset();
    uint64_t stalls0 = stat_of("stalls"), timers0 = stat_of("stall_timers");
    ASSERT_OK(usched_spawn_on(sched, NULL, 0, holder, NULL));
    ASSERT_OK(usched_wait(sched));
    int a0 = atomic_load(&armed_cpu0), wd = atomic_load(&woke_during);
    int qd = atomic_load(&queued_during);
    int ns = atomic_load(&nsleep);
    printf("%s: %d of %d sleepers armed on CPU 0, %d woke before it was released, %d of %d queued ran "
           "meanwhile; stalls +%llu, stall_timers +%llu, stall_moved %llu\n",
           m ? "read" : "spin", a0, ns, wd, qd, NQUEUED,
           (unsigned long long)(stat_of("stalls") - stalls0),
           (unsigned long long)(stat_of("stall_timers") - timers0),
           (unsigned long long)stat_of("stall_moved"));
    ASSERT_GT(a0, 0); /* the case tests something: timers sat on CPU 0 */
    ASSERT_GT(pending_cpu0, 0); /* ...and were still pending when the hold began */
    ASSERT_EQ(wd, ns);
    ASSERT_EQ(qd, NQUEUED);
    ASSERT_GT(stat_of("stalls"), stalls0);
    ASSERT_GT(stat_of("stall_timers"), timers0);
    /* Bound fibers are never moved: they waited for CPU 0. */
    ASSERT_EQ(atomic_load(&bound_ran), NBOUND);
    ASSERT_EQ(atomic_load(&bound_during), 0);
    ASSERT_EQ(atomic_load(&bound_elsewhere), 0);
}

/* I/O readiness behind a held CPU: a fiber of CPU 0 waits in usched_read on
 * a pipe; CPU 0's bound fiber then computes; an outside thread writes. The
 * reader must get its byte while CPU 0 is still held, though the other CPUs
 * may all have parked on their futex before any fd was waited on (then only
 * the monitor's wake-up puts one in the poller). */
static int iopipe[2];
static _Atomic int io_reading, io_got, io_during;

static void io_reader(void *arg)
{
    (void)arg;
    char c;
    atomic_store(&io_reading, 1);
    ASSERT_EQ(usched_read(iopipe[0], &c, 1, USCHED_FOREVER), 1);
    if (atomic_load(&holding)) atomic_store(&io_during, 1);
    atomic_store(&io_got, 1);
}

static void *io_writer(void *arg)
{
    (void)arg;
    while (!atomic_load(&holding)) usleep(1000);
    ASSERT_EQ(write(iopipe[1], "x", 1), 1);
    return NULL;
}

static void io_holder(void *arg)
{
    (void)arg;
    ASSERT_OK(usched_spawn(sched, NULL, io_reader, NULL));
    while (!atomic_load(&io_reading)) usched_yield();
    for (int i = 0; i < 100; i++) usched_yield(); /* the reader is now blocked in the poller's wait */
    atomic_store(&holding, 1);
    double end = test_now() + BOUND_S;
    while (!atomic_load(&io_got) && test_now() < end) __asm__ volatile("" ::: "memory");
    atomic_store(&holding, 0);
}

static void case_io(void)
{
    ASSERT_EQ(pipe(iopipe), 0);
    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, io_writer, NULL), 0);
    ASSERT_OK(usched_spawn_on(sched, NULL, 0, io_holder, NULL));
    ASSERT_OK(usched_wait(sched));
    ASSERT_EQ(pthread_join(th, NULL), 0);
    printf("io: the reader got its byte %s CPU 0 was released\n",
           atomic_load(&io_during) ? "before" : "after");
    ASSERT_EQ(atomic_load(&io_got), 1);
    ASSERT_EQ(atomic_load(&io_during), 1);
    ASSERT_OK(usched_close(iopipe[0]));
    ASSERT_OK(usched_close(iopipe[1]));
}

static uint64_t stalled_id;
static int stalled_cpu = -1;

/* Stalls its worker twice (until the monitor counted each), a sleep apart. */
static void staller(void *arg)
{
    (void)arg;
    stalled_id = usched__current()->id;
    stalled_cpu = usched_self_cpu();
    for (int round = 0; round < 2; round++) {
        uint64_t want = stat_of("stalls") + 1;
        double end = test_now() + BOUND_S;
        while (stat_of("stalls") < want && test_now() < end) __asm__ volatile("" ::: "memory");
        ASSERT_GE(stat_of("stalls"), want);
        ASSERT_OK(usched_sleep_ns(1000 * 1000)); /* a scheduling point */
    }
}

static void case_report(void)
{
    ASSERT_OK(usched_set(sched, "knobs", "stall_warn=1"));
    int fd = memfd_create("stderr", 0);
    ASSERT(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    ASSERT(saved >= 0);
    ASSERT(dup2(fd, 2) == 2);
    ASSERT_OK(usched_spawn(sched, NULL, staller, NULL));
    ASSERT_OK(usched_wait(sched));
    fflush(stderr);
    ASSERT(dup2(saved, 2) == 2);
    close(saved);
    ASSERT_OK(usched_set(sched, "knobs", "stall_warn=0"));
    char buf[8192];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    ASSERT(n > 0);
    buf[n] = '\0';
    char want[128];
    snprintf(want, sizeof want, "usched: fiber %llu has held CPU %d for ",
             (unsigned long long)stalled_id, stalled_cpu);
    int count = 0;
    for (const char *p = buf; (p = strstr(p, want)); p++) count++;
    printf("report: %d warning(s) for fiber %llu on CPU %d:\n%s", count,
           (unsigned long long)stalled_id, stalled_cpu, buf);
    ASSERT_EQ(count, 1);
    ASSERT_STR_CONTAINS(buf, " ms without a scheduling point");
}

/* Thieves for a stalled CPU (M5), on a scheduler that steals: CPU 0's bound
 * fiber waits until every other CPU parked, spawns NQUEUED fibers with the
 * spawn's own wake-up held back (s->park.waking set, as a wake-up already in
 * flight would), and computes. Nothing but the monitor can wake a thief:
 * the queued fibers must run elsewhere while CPU 0 is held, and the
 * monitor counts the wake-up (stall_wakes). */
static usched_t *steal_sched;
static _Atomic int steal_ran_during, steal_parked, steal_queued0;

static void steal_child(void *arg)
{
    (void)arg;
    if (atomic_load(&holding)) atomic_fetch_add(&steal_ran_during, 1);
}

static bool all_asleep(usched_t *s)
{
    for (int c = 1; c < s->ncpus; c++) {
        struct usched__wk *w = s->wk[c];
        if (atomic_load(&w->state) != WK_PARKED || atomic_load(&w->stats.v[USCHED_STAT_parks]) == 0) return false;
    }
    return true;
}

static void steal_holder(void *arg)
{
    (void)arg;
    usched_t *s = steal_sched;
    double end = test_now() + BOUND_S;
    /* Asleep, not just parking: a CPU counts itself parked (nparked, its
     * state) before its last look for work (P3), which would find the
     * fibers spawned below; its parks count grows only after that look.
     * Nothing wakes these CPUs again (their first park: no timers, no I/O). */
    while (!all_asleep(s) && test_now() < end) __asm__ volatile("" ::: "memory");
    atomic_store(&steal_parked, all_asleep(s));
    uint32_t zero = 0;
    while (!atomic_compare_exchange_weak(&s->park.waking, &zero, 1)) zero = 0;
    atomic_store(&holding, 1);
    for (int i = 0; i < NQUEUED; i++) ASSERT_OK(usched_spawn(s, NULL, steal_child, NULL));
    /* Where the policy put them: CPU 0's own queues (a thief's to take) or
     * other CPUs (their inboxes, kicked) or the shared queue. */
    struct usched__wk *w0 = s->wk[0];
    atomic_store(&steal_queued0, (int)usched__ring_len(&w0->ring) + (atomic_load(&w0->next) != NULL));
    atomic_store(&s->park.waking, 0);
    end = test_now() + BOUND_S;
    while (atomic_load(&steal_ran_during) < NQUEUED && test_now() < end) __asm__ volatile("" ::: "memory");
    atomic_store(&holding, 0);
}

static void case_steal(const char *topo)
{
    ASSERT_OK(usched_create(&steal_sched));
    if (topo) ASSERT_OK(usched_set(steal_sched, "topology", topo));
    ASSERT_OK(usched_set(steal_sched, "knobs", "preempt_us=0"));
    ASSERT_OK(usched_start(steal_sched));
    atomic_store(&steal_ran_during, 0);
    ASSERT_OK(usched_spawn_on(steal_sched, NULL, 0, steal_holder, NULL));
    ASSERT_OK(usched_wait(steal_sched));
    uint64_t wakes = 0, stalls = 0;
    int q0 = atomic_load(&steal_queued0);
    bool steals = steal_sched->pol_steals;
    /* The monitor counts the wake-up once its futex wake returned, which
     * can be after the thief ran them all and the holder ended: wait for
     * the count (bounded; it stays 0 only if the monitor woke nobody). */
    double end = test_now() + BOUND_S;
    do {
        ASSERT_OK(usched_stat(steal_sched, "stall_wakes", &wakes));
    } while (steals && q0 == NQUEUED && wakes == 0 && test_now() < end && usleep(1000) == 0);
    ASSERT_OK(usched_stat(steal_sched, "stalls", &stalls));
    printf("steal: other CPUs parked %d, %d of %d spawned queued on CPU 0, %d ran while it was held; "
           "stalls %llu, stall_wakes %llu%s\n",
           atomic_load(&steal_parked), q0, NQUEUED, atomic_load(&steal_ran_during), (unsigned long long)stalls,
           (unsigned long long)wakes, steals && q0 == NQUEUED ? "" : " (the policy does not steal, or placed some elsewhere)");
    ASSERT_EQ(atomic_load(&steal_parked), 1); /* no thief was awake */
    /* Progress under every policy: moved (no stealing), placed elsewhere,
     * or stolen by the CPU the monitor woke. */
    ASSERT_EQ(atomic_load(&steal_ran_during), NQUEUED);
    /* All on CPU 0: no CPU was kicked for one of them (an inbox), so only
     * the monitor can have woken the thief. */
    if (steals && q0 == NQUEUED) ASSERT_GT(wakes, 0);
    ASSERT_OK(usched_destroy(steal_sched));
}

/* The monitor sleeps once every worker parked. */
static void case_idle(void)
{
    double end = test_now() + BOUND_S;
    while (stat_of("monitor_sleeps") == 0 && test_now() < end) usleep(1000);
    printf("idle: monitor_sleeps %llu\n", (unsigned long long)stat_of("monitor_sleeps"));
    ASSERT_GT(stat_of("monitor_sleeps"), 0);
}

/* The stall instants of a trace file (docs/trace.md): track events of
 * type instant named stall, in the file's packets. */
static uint64_t count_stalls(const char *path)
{
    FILE *f = fopen(path, "rb");
    ASSERT(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    uint8_t *buf = malloc((size_t)n + 1);
    ASSERT(buf);
    ASSERT_EQ_U(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    uint64_t count = 0, tag, len, v;
    for (const uint8_t *p = buf, *end = buf + n; p < end;) {
        ASSERT(tf_get_varint(&p, end, &tag) == 0 && tag == ((TF_TRACE_PACKET << 3) | PB_LEN));
        ASSERT(tf_get_varint(&p, end, &len) == 0 && len <= (uint64_t)(end - p));
        const uint8_t *q = p, *pe = p + len;
        p = pe;
        while (q < pe) { /* the packet's fields */
            ASSERT(tf_get_varint(&q, pe, &tag) == 0);
            if ((tag & 7) == PB_VARINT) {
                ASSERT(tf_get_varint(&q, pe, &v) == 0);
                continue;
            }
            ASSERT((tag & 7) == PB_LEN && tf_get_varint(&q, pe, &len) == 0 && len <= (uint64_t)(pe - q));
            const uint8_t *e = q, *ee = q + len;
            q = ee;
            if (tag >> 3 != TF_P_TRACK_EVENT) continue;
            uint64_t type = 0, name = 0;
            while (e < ee) { /* the event's fields */
                ASSERT(tf_get_varint(&e, ee, &tag) == 0);
                ASSERT(tf_get_varint(&e, ee, &v) == 0);
                if ((tag & 7) == PB_LEN) e += v;
                else if (tag >> 3 == TF_E_TYPE) type = v;
                else if (tag >> 3 == TF_E_NAME_IID) name = v;
            }
            count += type == TF_T_INSTANT && name == TF_N_stall + 1;
        }
    }
    free(buf);
    return count;
}

int main(int argc, char **argv)
{
    ASSERT_EQ(pipe(pipefd), 0);
    ASSERT_OK(usched_create(&sched));
    if (argc > 1 && argv[1][0]) ASSERT_OK(usched_set(sched, "topology", argv[1]));
    /* Preemption off: these cases are about a fiber that holds its CPU
     * (docs/preempt.md has the cases where it is taken back). */
    ASSERT_OK(usched_set(sched, "knobs", "steal=0,preempt_us=0"));
    if (argc > 2) ASSERT_OK(usched_set(sched, "knobs", argv[2]));
    char trace[64];
    snprintf(trace, sizeof trace, "/tmp/usched-monitor-%d.pftrace", (int)getpid());
    ASSERT_OK(usched_set(sched, "trace", trace));
    ASSERT_OK(usched_start(sched));
    if (usched_ncpus(sched) < 2) {
        printf("skipped: one CPU, nowhere else to serve it\n");
        usched_destroy(sched);
        unlink(trace);
        return 77;
    }
    case_idle();
    case_hold(0);
    case_hold(1);
    case_io();
    case_report();
    case_steal(argc > 1 && argv[1][0] ? argv[1] : NULL);
    uint64_t stalls = stat_of("stalls");
    ASSERT_OK(usched_destroy(sched));
    /* trace: one stall instant per episode the monitor counted */
    uint64_t traced = count_stalls(trace);
    unlink(trace);
    printf("trace: %llu stall events, stalls counter %llu\n", (unsigned long long)traced,
           (unsigned long long)stalls);
    ASSERT_EQ_U(traced, stalls);
    printf("ok\n");
    return 0;
}
