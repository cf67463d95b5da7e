/* usched bench: the cross-CPU probe (bench_xfer.h). */
#include "bench_xfer.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

int bench_xfer_cpus(int *a, int *b)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) < 0) return -1;
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &set)) *(n++ ? b : a) = c;
    return n == 2 ? 0 : -1;
}

struct probe {
    _Alignas(64) atomic_long line; /* the line passed back and forth: odd from the timer, even back */
    _Alignas(64) atomic_bool stop; /* the timer gave up (deadline) */
    long total;                    /* round trips, warm-up included */
};

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield" ::: "memory");
#endif
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Waits until the line holds `want`; false if the other side gave up. */
static bool await(struct probe *p, long want)
{
    while (atomic_load_explicit(&p->line, memory_order_acquire) != want)
        if (atomic_load_explicit(&p->stop, memory_order_relaxed)) return false;
        else relax();
    return true;
}

static void *partner(void *arg)
{
    struct probe *p = arg;
    for (long i = 0; i < p->total; i++) {
        if (!await(p, 2 * i + 1)) break;
        atomic_store_explicit(&p->line, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

struct timer_arg {
    struct probe *p;
    int warm;
    double ns;
};

static void *timer(void *arg)
{
    struct timer_arg *t = arg;
    struct probe *p = t->p;
    double t0 = now_s(), start = t0;
    t->ns = NAN;
    for (long i = 0; i < p->total; i++) {
        if (i == t->warm) start = now_s();
        atomic_store_explicit(&p->line, 2 * i + 1, memory_order_release);
        /* a partner CPU given to other work could keep this waiting: the
         * deadline is checked every 256 round trips, and every 4096 spins */
        for (unsigned spins = 0; atomic_load_explicit(&p->line, memory_order_acquire) != 2 * i + 2;) {
            relax();
            if ((++spins & 4095) == 0 && now_s() - t0 > 1.0) goto give_up;
        }
        if ((i & 255) == 255 && now_s() - t0 > 1.0) goto give_up;
    }
    t->ns = (now_s() - start) * 1e9 / (double)(p->total - t->warm);
    return NULL;
give_up:
    atomic_store_explicit(&p->stop, true, memory_order_relaxed);
    return NULL;
}

static int start_on(pthread_t *th, int cpu, void *(*fn)(void *), void *arg)
{
    pthread_attr_t at;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_attr_init(&at)) return -1;
    int rc = pthread_attr_setaffinity_np(&at, sizeof set, &set);
    if (!rc) rc = pthread_create(th, &at, fn, arg);
    pthread_attr_destroy(&at);
    return rc ? -1 : 0;
}

double bench_xfer_probe(int a, int b, int rounds)
{
    if (rounds < 1 || a < 0 || b < 0 || a == b) return NAN;
    static struct probe p; /* one probe at a time; aligned lines */
    atomic_store(&p.line, 0);
    atomic_store(&p.stop, false);
    struct timer_arg t = {.p = &p, .warm = rounds / 8};
    p.total = rounds + t.warm;
    pthread_t pt, tt;
    if (start_on(&pt, b, partner, &p) < 0) return NAN;
    if (start_on(&tt, a, timer, &t) < 0) {
        atomic_store(&p.stop, true);
        pthread_join(pt, NULL);
        return NAN;
    }
    pthread_join(tt, NULL);
    pthread_join(pt, NULL);
    return t.ns;
}

struct spin_arg {
    double until;
    unsigned long sum; /* the loop's result, kept so that it is computed */
};

/* Plain arithmetic, no pause instruction: a hypervisor may take a vCPU that
 * pauses in a loop for idle (KVM's pause-loop exiting), which is what the
 * warm-up is to undo. */
static void *spin(void *arg)
{
    struct spin_arg *a = arg;
    unsigned long x = 1;
    while (now_s() < a->until)
        for (int i = 0; i < 10000; i++) x = x * 6364136223846793005ul + 1442695040888963407ul;
    a->sum = x;
    return NULL;
}

int bench_warmup(double ms)
{
    if (!(ms > 0)) return 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) < 0) return -1;
    enum { MAX = 1024 };
    static pthread_t th[MAX];
    static struct spin_arg args[MAX];
    double until = now_s() + ms * 1e-3;
    int n = 0, rc = 0;
    for (int c = 0; c < CPU_SETSIZE && n < MAX; c++) {
        if (!CPU_ISSET(c, &set)) continue;
        args[n] = (struct spin_arg){.until = until};
        if (start_on(&th[n], c, spin, &args[n]) < 0) {
            rc = -1;
            break;
        }
        n++;
    }
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    return rc;
}
