/*
 * Preemption (src/core/preempt.c, preempt_sig.c, docs/preempt.md), on one
 * worker (a virtual 1-CPU topology), so that only preemption can let a
 * second fiber run beside a fiber that never yields:
 *
 *   sleep    a fiber in an endless loop without calls; a second fiber
 *            sleeps 1 ms fifty times and wakes each time (the loop ends
 *            only once it has), and `preempts` counts at least fifty;
 *   two      two such loops taking strict turns (each waits, spinning, for
 *            the other's round): both finish all their rounds;
 *   off      the same loop inside usched_preempt_off: the sleeper does not
 *            run while it loops, `preempts` does not move and
 *            `preempt_refused_off` does; usched_preempt_on then takes the
 *            owed preemption (`preempt_deferred`) and the sleeper runs;
 *   libc     loops inside memset and inside qsort with a comparator of the
 *            program: preempted, and every preemption interrupted the
 *            program's own code (the handler's last PC, checked with
 *            dladdr against the executable and libusched's section), while
 *            memset's time is refused as unsafe;
 *   fp       a loop that keeps values in SIMD registers and the x87/MXCSR
 *            rounding mode is preempted many times and computes what it
 *            computes without preemption;
 *   slices   each built-in policy resolves preempt_us=-1 to its kernel's
 *            slice; a hog and a request fiber bound to one CPU: each of the
 *            requests runs (a preemption each), and the longest run the
 *            monitor saw (run_max_us) is at least the slice: no preemption
 *            came before it (counters, not times);
 *   queue    a hog bound to the one CPU spawns NQUEUE fibers and loops
 *            until they ran: all of them run after the same preemption
 *            (each reads `preempts`: one value), before the hog is back -
 *            a preempted bound fiber waits behind the queue;
 *   migrate  three loops on two workers under the global policy, each
 *            preempted and resumed on the other worker many times: each
 *            worker keeps its own alternate signal stack;
 *   api      usched_preempt_off/on outside a fiber: -EPERM; on at depth 0:
 *            -EINVAL; nesting returns the depth; preempt_sig naming a
 *            signal the program handles: usched_start fails -EBUSY naming
 *            it; an unusable one (SIGSEGV): -EINVAL.
 * The loops give up after LOOP_CAP_S seconds (reading the clock every few
 * million turns), a bound no working preemption reaches; without
 * preemption (core_preempt 0) sleep, two and slices fail there.
 *
 * Usage: core_preempt [preempt_us]   (default 1000, for sleep, two, libc, fp)
 */
#include <dlfcn.h>
#include <errno.h>
#include <fenv.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/preempt.h"
#include "test.h"
#include "usched.h"

#define ONE_CPU "pack:1 l3:1 l2:1 core:1 pu:1"
#define LOOP_CAP_S 20.0
#define NSLEEPS 50

extern const char __start_usched_text[] __attribute__((weak));
extern const char __stop_usched_text[] __attribute__((weak));

static const char *preempt_us = "1000";
static usched_t *sched;
static _Atomic int sleeps_done, gave_up;
static _Atomic long progress[2];

static uint64_t stat_of(usched_t *s, const char *name)
{
    uint64_t v = 0;
    ASSERT_OK(usched_stat(s, name, &v));
    return v;
}

/* The preemption counters, before the assertions (a failure then shows
 * whether signals were refused, and why). */
static void print_counters(const char *what)
{
    static const char *const names[] = {"preempt_signals", "preempts", "preempt_refused_off", "preempt_refused_lock",
                                        "preempt_refused_unsafe", "preempt_skipped_syscall", "run_max_us"};
    printf("%s:", what);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        printf(" %s %llu", names[i], (unsigned long long)stat_of(sched, names[i]));
    printf("\n");
}

static usched_t *one_cpu(const char *knobs)
{
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "topology", ONE_CPU));
    ASSERT_OK(usched_set(s, "knobs", knobs));
    ASSERT_OK(usched_start(s));
    return s;
}

/* The cap's clock, read only every 2^22 turns: the loop stays in its own
 * code nearly all the time. */
static bool over_cap(unsigned long turn, double t0)
{
    if (turn & ((1ul << 22) - 1)) return false;
    if (test_now() - t0 < LOOP_CAP_S) return false;
    atomic_store(&gave_up, 1);
    return true;
}

/* A loop's test of its end: the shared counter is read once every 1,024
 * turns, so that nearly all of the loop is the program's own code. Under
 * ThreadSanitizer every atomic load is a call into its runtime, where a
 * preemption signal is refused as unsafe: a loop that read the counter at
 * every turn was refused most of its signals (1,187 of 1,239), and beside
 * the ule and bsd4 slices (94 and 100 ms) it reached LOOP_CAP_S. */
static bool reached(_Atomic int *counter, int want, unsigned long turn)
{
    return !(turn & 1023) && atomic_load_explicit(counter, memory_order_relaxed) >= want;
}

static _Atomic int sleeper_steps; /* the sleeper's start and each wake-up */

static void sleeper(void *arg)
{
    (void)arg;
    atomic_fetch_add(&sleeper_steps, 1);
    for (int i = 0; i < NSLEEPS; i++) {
        ASSERT_OK(usched_sleep_ns(1000 * 1000));
        atomic_fetch_add(&sleeps_done, 1);
        atomic_fetch_add(&sleeper_steps, 1);
    }
}

/* Spins without calls until the sleeper is done (or the cap). */
static void loop_until_slept(void *arg)
{
    (void)arg;
    double t0 = test_now();
    unsigned long turn = 0;
    while (!reached(&sleeps_done, NSLEEPS, ++turn) && !over_cap(turn, t0)) {
    }
}

static void case_sleep(void)
{
    char knobs[64];
    snprintf(knobs, sizeof knobs, "preempt_us=%s", preempt_us);
    sched = one_cpu(knobs);
    atomic_store(&sleeps_done, 0);
    atomic_store(&gave_up, 0);
    ASSERT_OK(usched_spawn(sched, NULL, loop_until_slept, NULL));
    ASSERT_OK(usched_spawn(sched, NULL, sleeper, NULL));
    ASSERT_OK(usched_wait(sched));
    print_counters("sleep");
    ASSERT_EQ(atomic_load(&gave_up), 0);
    ASSERT_EQ(atomic_load(&sleeps_done), NSLEEPS);
    ASSERT_GE(stat_of(sched, "preempts"), NSLEEPS);
    printf("sleep: %d sleeps beside a loop, preempts %llu, signals %llu, refused unsafe %llu, longest run %llu us\n",
           NSLEEPS, (unsigned long long)stat_of(sched, "preempts"),
           (unsigned long long)stat_of(sched, "preempt_signals"),
           (unsigned long long)stat_of(sched, "preempt_refused_unsafe"),
           (unsigned long long)stat_of(sched, "run_max_us"));
    ASSERT_OK(usched_destroy(sched));
}

/* A fiber blocked in a system call (nanosleep, which the kernel does not
 * restart after a handler) while another fiber waits for its CPU: the
 * monitor must not signal the sleeping thread (R3 in preempt.c): it passes
 * it over (preempt_skipped_syscall), and a call is cut short only by a
 * signal sent while the thread ran between two calls. It sleeps in 20 ms
 * steps until the monitor has passed it over at least once. */
static _Atomic int waiter_ran, eintrs;

static void waiting(void *arg)
{
    (void)arg;
    atomic_store(&waiter_ran, 1);
}

static void sleeps_in_kernel(void *arg)
{
    (void)arg;
    ASSERT_OK(usched_spawn(sched, NULL, waiting, NULL)); /* queued behind this fiber on the one CPU */
    double t0 = test_now();
    while (stat_of(sched, "preempt_skipped_syscall") == 0 && test_now() - t0 < LOOP_CAP_S) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        if (nanosleep(&ts, NULL) != 0 && errno == EINTR) atomic_fetch_add(&eintrs, 1);
    }
}

static void case_syscall(void)
{
    char knobs[64];
    snprintf(knobs, sizeof knobs, "preempt_us=%s", preempt_us);
    sched = one_cpu(knobs);
    ASSERT_OK(usched_spawn(sched, NULL, sleeps_in_kernel, NULL));
    ASSERT_OK(usched_wait(sched));
    print_counters("syscall");
    printf("syscall: skipped %llu, EINTR %d\n", (unsigned long long)stat_of(sched, "preempt_skipped_syscall"),
           atomic_load(&eintrs));
    ASSERT_GT(stat_of(sched, "preempt_skipped_syscall"), 0);
    /* R3 sends no signal to a thread seen asleep in the kernel; one seen
     * running between two nanosleeps may enter the next before the signal
     * lands (the race R3 names; its window is wide under qemu), so an
     * EINTR is allowed only for a signal that was sent. */
    ASSERT_GE(stat_of(sched, "preempt_signals"), (uint64_t)atomic_load(&eintrs));
    ASSERT_EQ(atomic_load(&waiter_ran), 1);
    ASSERT_OK(usched_destroy(sched));
}

/* Strict turns: loop 0 starts round r once loop 1 finished round r - 1,
 * loop 1 once loop 0 finished round r; each waits spinning, so every
 * round needs the other preempted. */
#define ROUNDS 20

static void two_loop(void *arg)
{
    int me = (int)(intptr_t)arg, other = 1 - me;
    double t0 = test_now();
    unsigned long turn = 0;
    for (long r = 1; r <= ROUNDS; r++) {
        while (atomic_load_explicit(&progress[other], memory_order_relaxed) < r - 1 + me)
            if (over_cap(++turn, t0)) return;
        atomic_store_explicit(&progress[me], r, memory_order_relaxed);
    }
}

static void case_two(void)
{
    char knobs[64];
    snprintf(knobs, sizeof knobs, "preempt_us=%s", preempt_us);
    sched = one_cpu(knobs);
    atomic_store(&gave_up, 0);
    progress[0] = progress[1] = 0;
    ASSERT_OK(usched_spawn(sched, NULL, two_loop, (void *)0));
    ASSERT_OK(usched_spawn(sched, NULL, two_loop, (void *)1));
    ASSERT_OK(usched_wait(sched));
    ASSERT_EQ(atomic_load(&gave_up), 0);
    ASSERT_EQ(atomic_load(&progress[0]), ROUNDS);
    ASSERT_EQ(atomic_load(&progress[1]), ROUNDS);
    ASSERT_GE(stat_of(sched, "preempts"), ROUNDS);
    printf("two: both loops progressed, preempts %llu\n", (unsigned long long)stat_of(sched, "preempts"));
    ASSERT_OK(usched_destroy(sched));
}

static _Atomic int off_steps_during; /* sleeper steps while preemption was off */

static void off_loop(void *arg)
{
    (void)arg;
    ASSERT_EQ(usched_preempt_off(), 1);
    ASSERT_EQ(usched_preempt_off(), 2); /* nests */
    ASSERT_EQ(usched_preempt_on(), 1);
    uint64_t p0 = stat_of(sched, "preempts");
    int steps0 = atomic_load(&sleeper_steps);
    double t0 = test_now();
    unsigned long turn = 0;
    /* Until three preemptions were refused; the counter is read rarely. */
    while (!over_cap(++turn, t0))
        if (!(turn & 0xfffff) && stat_of(sched, "preempt_refused_off") >= 3) break;
    int steps1 = atomic_load(&sleeper_steps);
    atomic_store(&off_steps_during, steps1 - steps0);
    ASSERT_EQ_U(stat_of(sched, "preempts"), p0);
    ASSERT_EQ(usched_preempt_on(), 0); /* takes the owed preemption: the sleeper runs */
    ASSERT_GT(atomic_load(&sleeper_steps), steps1);
    ASSERT_EQ(usched_preempt_on(), -EINVAL);
    /* On again: the loop is preempted as before. */
    loop_until_slept(NULL);
}

static void case_off(void)
{
    sched = one_cpu("preempt_us=500");
    atomic_store(&sleeps_done, 0);
    atomic_store(&sleeper_steps, 0);
    atomic_store(&gave_up, 0);
    ASSERT_OK(usched_spawn(sched, NULL, off_loop, NULL));
    ASSERT_OK(usched_spawn(sched, NULL, sleeper, NULL));
    ASSERT_OK(usched_wait(sched));
    ASSERT_EQ(atomic_load(&gave_up), 0);
    ASSERT_EQ(atomic_load(&off_steps_during), 0);
    ASSERT_GE(stat_of(sched, "preempt_refused_off"), 3);
    ASSERT_GE(stat_of(sched, "preempt_deferred"), 1);
    ASSERT_EQ(atomic_load(&sleeps_done), NSLEEPS);
    printf("off: refused %llu while off, deferred %llu, then preempts %llu\n",
           (unsigned long long)stat_of(sched, "preempt_refused_off"),
           (unsigned long long)stat_of(sched, "preempt_deferred"),
           (unsigned long long)stat_of(sched, "preempts"));
    ASSERT_OK(usched_destroy(sched));
}

/* ---- libc: every preemption interrupted the program's own code ---- */

static _Atomic int bad_pc, pcs_checked;

/* The PC the handler last preempted at, on the one CPU: the program's own
 * code, never libc's nor libusched's. */
static void check_last_pc(void)
{
    uintptr_t pc = atomic_load_explicit(&sched->pre->cpu[0].last_pc, memory_order_relaxed);
    if (!pc) return;
    Dl_info at, exe;
    ASSERT(dladdr((void *)pc, &at));
    ASSERT(dladdr((void *)check_last_pc, &exe));
    bool in_lib = __start_usched_text && pc >= (uintptr_t)__start_usched_text && pc < (uintptr_t)__stop_usched_text;
    if (strcmp(at.dli_fname, exe.dli_fname) != 0 || in_lib) {
        fprintf(stderr, "libc: preempted at %p in %s%s\n", (void *)pc, at.dli_fname, in_lib ? " (libusched)" : "");
        atomic_store(&bad_pc, 1);
    }
    atomic_fetch_add(&pcs_checked, 1);
}

static void checking_sleeper(void *arg)
{
    (void)arg;
    for (int i = 0; i < NSLEEPS; i++) {
        ASSERT_OK(usched_sleep_ns(1000 * 1000));
        check_last_pc();
        atomic_fetch_add(&sleeps_done, 1);
    }
}

static int cmp_calls;

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    /* some work of the program's own in each call */
    for (volatile int i = 0; i < 200; i++) {
    }
    cmp_calls++;
    return (x > y) - (x < y);
}

/* memset's share of the loop's time is about half: most asks land in it
 * and are refused, the others in the loop's own code. */
enum { MEMSET_BYTES = 1 << 20, QSORT_N = 1 << 14 };

static void libc_loop(void *arg)
{
    int mode = (int)(intptr_t)arg;
    char *buf = mode == 0 ? malloc(MEMSET_BYTES) : NULL;
    int *v = mode == 1 ? malloc(QSORT_N * sizeof *v) : NULL;
    ASSERT(buf || v);
    double t0 = test_now();
    while (atomic_load(&sleeps_done) < NSLEEPS && test_now() - t0 < LOOP_CAP_S) {
        if (mode == 0) {
            memset(buf, (int)(t0 + 1), MEMSET_BYTES);
            for (volatile int i = 0; i < 50000; i++) {
            }
        } else {
            for (int i = 0; i < QSORT_N; i++) v[i] = (int)((unsigned)i * 2654435761u >> 7);
            qsort(v, QSORT_N, sizeof *v, cmp_int);
        }
    }
    if (atomic_load(&sleeps_done) < NSLEEPS) atomic_store(&gave_up, 1);
    free(buf);
    free(v);
}

static void case_libc(int mode)
{
    char knobs[64];
    snprintf(knobs, sizeof knobs, "preempt_us=%s", preempt_us);
    sched = one_cpu(knobs);
    atomic_store(&sleeps_done, 0);
    atomic_store(&gave_up, 0);
    atomic_store(&bad_pc, 0);
    atomic_store(&pcs_checked, 0);
    ASSERT_OK(usched_spawn(sched, NULL, libc_loop, (void *)(intptr_t)mode));
    ASSERT_OK(usched_spawn(sched, NULL, checking_sleeper, NULL));
    ASSERT_OK(usched_wait(sched));
    ASSERT_EQ(atomic_load(&gave_up), 0);
    ASSERT_EQ(atomic_load(&bad_pc), 0);
    ASSERT_EQ(atomic_load(&pcs_checked), NSLEEPS);
    ASSERT_GE(stat_of(sched, "preempts"), 1);
    if (mode == 0) ASSERT_GE(stat_of(sched, "preempt_refused_unsafe"), 1);
    printf("libc %s: preempts %llu, refused unsafe %llu, all in the program's code\n",
           mode == 0 ? "memset" : "qsort", (unsigned long long)stat_of(sched, "preempts"),
           (unsigned long long)stat_of(sched, "preempt_refused_unsafe"));
    ASSERT_OK(usched_destroy(sched));
}

/* ---- fp: registers and FP modes survive preemption ---- */

/* Not inlined, and n passes through an empty asm: a const function of n
 * would otherwise be computed once for both modes (clang has no noipa). */
__attribute__((noinline)) static double fp_work(long n)
{
    __asm__ volatile("" : "+r"(n));
    /* the compiler keeps these in SIMD registers across the loop */
    double a = 1.0, b = 0.5, c = 0.25, d = 0.125;
    for (long i = 0; i < n; i++) {
        a = a * 1.0000001 + b;
        b = b * 0.9999999 + c;
        c = c * 1.0000002 - d;
        d = d * 0.9999998 + 1e-9;
        a = a / 1.0000003;
    }
    return a + b * 3 + c * 5 + d * 7;
}

#define FP_N (20 * 1000 * 1000)
static double fp_result[2];
static const int fp_mode[2] = {FE_UPWARD, FE_DOWNWARD};

/* Each fiber in its own rounding mode: a mode that leaked from one to the
 * other across a preemption changes the result. */
static void fp_loop(void *arg)
{
    int i = (int)(intptr_t)arg;
    ASSERT_EQ(fesetround(fp_mode[i]), 0);
    fp_result[i] = fp_work(FP_N);
    ASSERT_EQ(fegetround(), fp_mode[i]);
    fesetround(FE_TONEAREST);
}

static void case_fp(void)
{
    /* The references, without preemption, on this thread. */
    double want[2];
    for (int i = 0; i < 2; i++) {
        fesetround(fp_mode[i]);
        want[i] = fp_work(FP_N);
    }
    fesetround(FE_TONEAREST);
    ASSERT(want[0] != want[1]);
    char knobs[64];
    snprintf(knobs, sizeof knobs, "preempt_us=%s", preempt_us);
    sched = one_cpu(knobs);
    ASSERT_OK(usched_spawn(sched, NULL, fp_loop, (void *)0));
    ASSERT_OK(usched_spawn(sched, NULL, fp_loop, (void *)1));
    ASSERT_OK(usched_wait(sched));
    ASSERT(fp_result[0] == want[0] && fp_result[1] == want[1]);
    ASSERT_GE(stat_of(sched, "preempts"), 1);
    printf("fp: two FP loops preempted %llu times, both results exact\n",
           (unsigned long long)stat_of(sched, "preempts"));
    ASSERT_OK(usched_destroy(sched));
}

/* ---- slices: each policy's own ---- */

#define NREQ 8

static _Atomic int reqs_done;

static void hog(void *arg)
{
    (void)arg;
    double t0 = test_now();
    unsigned long turn = 0;
    while (!reached(&reqs_done, NREQ, ++turn) && !over_cap(turn, t0)) {
    }
}

static void requests(void *arg)
{
    (void)arg;
    for (int i = 0; i < NREQ; i++) {
        ASSERT_OK(usched_sleep_ns(100 * 1000));
        atomic_fetch_add(&reqs_done, 1);
    }
}

static void case_slices(void)
{
    static const struct {
        const char *policy;
        int64_t slice_us;
    } pols[] = {{"usched", 10000}, {"linux", 750}, {"ule", 94000}, {"bsd4", 100000}, {"global", 100000}};
    for (size_t i = 0; i < sizeof pols / sizeof pols[0]; i++) {
        ASSERT_OK(usched_create(&sched));
        ASSERT_OK(usched_set(sched, "topology", ONE_CPU));
        ASSERT_OK(usched_set(sched, "policy", pols[i].policy));
        ASSERT_OK(usched_set(sched, "knobs", "preempt_us=-1"));
        ASSERT_OK(usched_start(sched));
        ASSERT(sched->pre);
        /* one CPU: Linux's factor is 1 + log2(1) = 1 */
        ASSERT_EQ_U(sched->pre->ns, (uint64_t)pols[i].slice_us * 1000);
        atomic_store(&reqs_done, 0);
        atomic_store(&gave_up, 0);
        ASSERT_OK(usched_spawn_on(sched, NULL, 0, hog, NULL));
        ASSERT_OK(usched_spawn_on(sched, NULL, 0, requests, NULL));
        ASSERT_OK(usched_wait(sched));
        ASSERT_EQ(atomic_load(&gave_up), 0);
        ASSERT_EQ(atomic_load(&reqs_done), NREQ);
        ASSERT_GE(stat_of(sched, "preempts"), NREQ);
        ASSERT_GE(stat_of(sched, "run_max_us"), (uint64_t)pols[i].slice_us);
        printf("slices %s: slice %lld us, %d requests beside a hog, preempts %llu, longest run %llu us\n",
               pols[i].policy, (long long)pols[i].slice_us, NREQ, (unsigned long long)stat_of(sched, "preempts"),
               (unsigned long long)stat_of(sched, "run_max_us"));
        ASSERT_OK(usched_destroy(sched));
    }
}

/* ---- a preempted fiber resumed on another worker ---- */

#define TWO_CPUS "pack:1 l3:1 l2:1 core:2 pu:1"
#define MIGRATIONS 16

static _Atomic int migrations;
static void *alt_sp[2][2]; /* [before, after][cpu]: the worker's alternate signal stack */
static uintptr_t alt_tp[2][2];

/* The thread pointer, read without a call (a compiler may not keep it in
 * a register across the asm). */
static inline uintptr_t thread_ptr(void)
{
    uintptr_t tp;
#if defined(__x86_64__)
    __asm__ volatile("mov %%fs:0, %0" : "=r"(tp));
#else
    __asm__ volatile("mrs %0, tpidr_el0" : "=r"(tp));
#endif
    return tp;
}

static void note_alt(void *arg)
{
    intptr_t i = (intptr_t)arg; /* phase * 2 + cpu */
    stack_t ss;
    ASSERT_OK(sigaltstack(NULL, &ss));
    alt_sp[i / 2][i % 2] = ss.ss_sp;
    alt_tp[i / 2][i % 2] = thread_ptr();
}

/* Spins without calls; only a preemption resumed elsewhere changes the
 * thread it runs on. Counts those until MIGRATIONS (or the cap). */
static void migrating_loop(void *arg)
{
    (void)arg;
    double t0 = test_now();
    unsigned long turn = 0;
    uintptr_t tp = thread_ptr();
    while (atomic_load_explicit(&migrations, memory_order_relaxed) < MIGRATIONS && !over_cap(++turn, t0)) {
        uintptr_t now = thread_ptr();
        if (now != tp) {
            tp = now;
            atomic_fetch_add_explicit(&migrations, 1, memory_order_relaxed);
        }
    }
}

static void note_alts(int phase)
{
    usched_task_t *t[2];
    for (int c = 0; c < 2; c++) ASSERT_OK(usched_spawn_on(sched, &t[c], c, note_alt, (void *)(intptr_t)(phase * 2 + c)));
    for (int c = 0; c < 2; c++) ASSERT_OK(usched_join(t[c]));
}

/* The global policy queues a preempted fiber on the shared queue, so
 * either worker resumes it: three loops on two workers migrate. Each
 * worker keeps its own alternate signal stack throughout (the signal frame
 * of a fiber preempted on one worker held that worker's, and its return on
 * the other installed it there). */
static void case_migrate(void)
{
    char knobs[64];
    snprintf(knobs, sizeof knobs, "preempt_us=%s", preempt_us);
    ASSERT_OK(usched_create(&sched));
    ASSERT_OK(usched_set(sched, "topology", TWO_CPUS));
    ASSERT_OK(usched_set(sched, "policy", "global"));
    ASSERT_OK(usched_set(sched, "knobs", knobs));
    ASSERT_OK(usched_start(sched));
    atomic_store(&migrations, 0);
    atomic_store(&gave_up, 0);
    note_alts(0);
    usched_task_t *t[3];
    for (int i = 0; i < 3; i++) ASSERT_OK(usched_spawn(sched, &t[i], migrating_loop, NULL));
    for (int i = 0; i < 3; i++) ASSERT_OK(usched_join(t[i]));
    note_alts(1);
    print_counters("migrate");
    printf("migrate: %d migrations of preempted loops; alternate stacks %p %p before, %p %p after\n",
           atomic_load(&migrations), alt_sp[0][0], alt_sp[0][1], alt_sp[1][0], alt_sp[1][1]);
    ASSERT_EQ(atomic_load(&gave_up), 0);
    ASSERT_GE(atomic_load(&migrations), MIGRATIONS);
    for (int c = 0; c < 2; c++) {
        ASSERT(alt_tp[0][c] == alt_tp[1][c]); /* the same worker thread */
        ASSERT(alt_sp[0][c] == alt_sp[1][c]);
    }
    ASSERT(alt_sp[1][0] != alt_sp[1][1]);
    ASSERT_OK(usched_destroy(sched));
}

/* ---- queue: a preempted bound fiber waits behind the queue ---- */

#define NQUEUE 16
static _Atomic int queue_ran;
static uint64_t queue_seen[NQUEUE];

static void queued_fiber(void *arg)
{
    queue_seen[(long)arg] = stat_of(sched, "preempts");
    atomic_fetch_add(&queue_ran, 1);
}

/* Spawns the queue, then spins without calls until every queued fiber ran
 * (or the cap). */
static void loop_until_queue_ran(void *arg)
{
    (void)arg;
    for (long i = 0; i < NQUEUE; i++) ASSERT_OK(usched_spawn(sched, NULL, queued_fiber, (void *)i));
    double t0 = test_now();
    unsigned long turn = 0;
    while (atomic_load_explicit(&queue_ran, memory_order_relaxed) < NQUEUE && !over_cap(++turn, t0)) {
    }
}

static void case_queue(void)
{
    atomic_store(&gave_up, 0);
    atomic_store(&queue_ran, 0);
    char knobs[64];
    snprintf(knobs, sizeof knobs, "preempt_us=%s", preempt_us);
    sched = one_cpu(knobs);
    usched_task_t *hog;
    ASSERT_OK(usched_spawn_on(sched, &hog, 0, loop_until_queue_ran, NULL));
    ASSERT_OK(usched_join(hog));
    ASSERT_OK(usched_wait(sched));
    print_counters("queue");
    ASSERT(!atomic_load(&gave_up));
    ASSERT_EQ(atomic_load(&queue_ran), NQUEUE);
    for (int i = 1; i < NQUEUE; i++) ASSERT_EQ_U(queue_seen[i], queue_seen[0]);
    ASSERT_GE(queue_seen[0], 1);
    ASSERT_OK(usched_destroy(sched));
    printf("queue: %d fibers ran after one preemption (preempts %llu when they ran)\n", NQUEUE,
           (unsigned long long)queue_seen[0]);
}

/* ---- api and bad input ---- */

static void on_usr2(int sig)
{
    (void)sig;
}

static void nest(void *arg)
{
    (void)arg;
    ASSERT_EQ(usched_preempt_on(), -EINVAL);
    ASSERT_EQ(usched_preempt_off(), 1);
    ASSERT_EQ(usched_preempt_off(), 2);
    ASSERT_EQ(usched_preempt_on(), 1);
    ASSERT_EQ(usched_preempt_on(), 0);
}

static void case_api(void)
{
    ASSERT_EQ(usched_preempt_off(), -EPERM);
    ASSERT_EQ(usched_preempt_on(), -EPERM);
    sched = one_cpu("preempt_us=1000");
    ASSERT_OK(usched_spawn(sched, NULL, nest, NULL));
    ASSERT_OK(usched_wait(sched));
    ASSERT_OK(usched_destroy(sched));

    struct sigaction sa = {.sa_handler = on_usr2};
    ASSERT_OK(sigaction(SIGUSR2, &sa, NULL));
    char knobs[64];
    snprintf(knobs, sizeof knobs, "preempt_us=1000,preempt_sig=%d", SIGUSR2);
    ASSERT_OK(usched_create(&sched));
    ASSERT_OK(usched_set(sched, "knobs", knobs));
    ASSERT_EQ(usched_start(sched), -EBUSY);
    ASSERT_STR_CONTAINS(usched_last_error(), "preempt_sig");
    ASSERT_STR_CONTAINS(usched_last_error(), "already has a handler");
    ASSERT_OK(usched_destroy(sched));

    snprintf(knobs, sizeof knobs, "preempt_us=1000,preempt_sig=%d", SIGSEGV);
    ASSERT_OK(usched_create(&sched));
    ASSERT_OK(usched_set(sched, "knobs", knobs));
    ASSERT_EQ(usched_start(sched), -EINVAL);
    ASSERT_STR_CONTAINS(usched_last_error(), "cannot preempt");
    ASSERT_OK(usched_destroy(sched));

    /* Off: nothing installed, the same handler check does not apply. */
    snprintf(knobs, sizeof knobs, "preempt_us=0,preempt_sig=%d", SIGUSR2);
    ASSERT_OK(usched_create(&sched));
    ASSERT_OK(usched_set(sched, "knobs", knobs));
    ASSERT_OK(usched_start(sched));
    ASSERT(!sched->pre);
    ASSERT_OK(usched_destroy(sched));
    printf("api: errors as documented\n");
}

int main(int argc, char **argv)
{
    if (argc > 1) preempt_us = argv[1];
    case_api();
    case_sleep();
    case_syscall();
    case_two();
    case_off();
    case_libc(0);
    case_libc(1);
    case_fp();
    case_slices();
    case_queue();
    case_migrate();
    printf("core_preempt: ok\n");
    return 0;
}
