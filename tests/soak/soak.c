/*
 * Soak: long runs of every primitive on every policy, on the live machine
 * and on a virtual 2x6x2 (pack:2 l3:1 l2:6 core:1 pu:2), each count and
 * checksum checked exactly. At full size (--scale 100, `make soak`):
 *   chan    10^8 messages across 64 sender/receiver pairs (half rendezvous,
 *           half buffered), each receiver checking its pair's sequence;
 *   spawn   10^7 fibers spawned by 64 spawners, each child adding its index;
 *   mutex   64 fibers taking one mutex until the counter reaches 10^7, with
 *           an unprotected sum beside it that only the mutex keeps exact;
 *   sleep   10^6 sleeps of 0-50 us by 1000 fibers, each checked not to
 *           return early;
 *   servers every server of servers/ with 10^6 well-behaved requests and
 *           10^4 hostile connections of each kind (soak_servers.c), on the
 *           live machine only.
 * Prints one line per workload with its counts and time. Exit status 1 at
 * the first wrong count (both values printed), 2 for bad usage.
 *
 *   soak [--scale PCT] [--policy NAME] [--topology live|SRC] [--part primitives|servers]
 * --scale is a percentage (1 = the CTest run); USCHED_STRESS_SCALE (sanitizer
 * builds) shrinks it further. Without --policy every policy runs; without
 * --topology both the live machine and the virtual 2x6x2.
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "soak.h"
#include "test.h"
#include "usched.h"

#define VIRTUAL "pack:2 l3:1 l2:6 core:1 pu:2"
#define PAIRS 64
#define SPAWNERS 64
#define LOCKERS 64
#define SLEEPERS 1000
#define MAX_SLEEP_NS 50000

static double scale = 100; /* percent */
static const char *part;    /* --part: "primitives" or "servers"; NULL both */
const char *soak_label;

/* TSan makes each spawn cost milliseconds and each message tens of
 * microseconds (measured at 1% with USCHED_STRESS_SCALE=10: 67 s for one
 * policy), so its runs shrink ten times more. */
#define TSAN_DIVISOR (TEST_TSAN ? 10 : 1)

static long sized(double full)
{
    long n = (long)(full * scale / 100.0 / TSAN_DIVISOR);
    n = test_scale(n);
    return n < 1 ? 1 : n;
}

/* Share i of `total` split over `parts` (the first total % parts get one
 * more), so the parts add up to total exactly. */
static long share(long total, int parts, int i)
{
    return total / parts + (i < total % parts);
}

/* ---- chan ------------------------------------------------------------------------ */

struct pair {
    usched_chan_t *ch;
    long n;           /* messages */
    int id;
    uint64_t got, sum; /* receiver's count and checksum */
    int bad;           /* receiver saw a message out of order or from elsewhere */
};

/* A message: pair id in the high bits, sequence number (from 1) below. */
static void *msg_of(int id, long seq) { return (void *)(((uintptr_t)id << 40) | (uintptr_t)seq); }

static void sender(void *arg)
{
    struct pair *p = arg;
    for (long i = 1; i <= p->n; i++)
        if (usched_chan_send(p->ch, msg_of(p->id, i)) < 0) p->bad = 1;
    usched_chan_close(p->ch);
}

static void receiver(void *arg)
{
    struct pair *p = arg;
    void *m;
    long want = 1;
    while (usched_chan_recv(p->ch, &m) == 0) {
        if (m != msg_of(p->id, want)) p->bad = 1;
        p->got++;
        p->sum += (uintptr_t)m & ((UINT64_C(1) << 40) - 1);
        want++;
    }
}

static void soak_chan(usched_t *s)
{
    long total = sized(1e8);
    static struct pair pairs[PAIRS];
    usched_task_t *t[2 * PAIRS];
    for (int i = 0; i < PAIRS; i++) {
        pairs[i] = (struct pair){.n = share(total, PAIRS, i), .id = i};
        ASSERT_OK(usched_chan_create(&pairs[i].ch, i % 2 ? 16 : 0));
    }
    uint64_t t0 = soak_now_ns();
    for (int i = 0; i < PAIRS; i++) {
        ASSERT_OK(usched_spawn(s, &t[2 * i], receiver, &pairs[i]));
        ASSERT_OK(usched_spawn(s, &t[2 * i + 1], sender, &pairs[i]));
    }
    for (int i = 0; i < 2 * PAIRS; i++) ASSERT_OK(usched_join(t[i]));
    double secs = (double)(soak_now_ns() - t0) * 1e-9;
    uint64_t got = 0;
    for (int i = 0; i < PAIRS; i++) {
        CHECK_EQ("chan messages out of order or lost (pair flag)", pairs[i].bad, 0);
        uint64_t per = (uint64_t)pairs[i].n;
        CHECK_EQ("chan messages received by a pair", pairs[i].got, per);
        CHECK_EQ("chan checksum of a pair", pairs[i].sum, per * (per + 1) / 2);
        got += pairs[i].got;
        ASSERT_OK(usched_chan_destroy(pairs[i].ch));
    }
    CHECK_EQ("chan messages", got, total);
    printf("  chan   %11" PRIu64 " messages, %d pairs, checksums ok  %7.2f s  %6.0f ns/msg\n", got,
           PAIRS, secs, secs * 1e9 / (double)got);
}

/* ---- spawn ----------------------------------------------------------------------- */

struct spawner {
    long n;
    _Atomic uint64_t ran, sum;
};

struct child {
    struct spawner *sp;
    long index;
};

static void child(void *arg)
{
    struct child *c = arg;
    atomic_fetch_add_explicit(&c->sp->ran, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->sp->sum, (uint64_t)c->index, memory_order_relaxed);
}

/* Spawns its children in batches of 256, joined before the next batch, so
 * live fibers stay bounded (64 x 256; under TSan, which counts each live
 * fiber as a thread and stops at 8128, 64 x 32). */
static void spawner(void *arg)
{
    struct spawner *sp = arg;
    enum { BATCH = TEST_TSAN ? 32 : 256 };
    struct child kids[BATCH];
    usched_task_t *t[BATCH];
    for (long base = 0; base < sp->n; base += BATCH) {
        int k = sp->n - base < BATCH ? (int)(sp->n - base) : BATCH;
        for (int i = 0; i < k; i++) {
            kids[i] = (struct child){sp, base + i};
            ASSERT_OK(usched_spawn(usched_self(), &t[i], child, &kids[i]));
        }
        for (int i = 0; i < k; i++) ASSERT_OK(usched_join(t[i]));
    }
}

static void soak_spawn(usched_t *s)
{
    long total = sized(1e7);
    static struct spawner sp[SPAWNERS];
    usched_task_t *t[SPAWNERS];
    uint64_t t0 = soak_now_ns();
    for (int i = 0; i < SPAWNERS; i++) {
        sp[i].n = share(total, SPAWNERS, i);
        atomic_store(&sp[i].ran, 0);
        atomic_store(&sp[i].sum, 0);
        ASSERT_OK(usched_spawn(s, &t[i], spawner, &sp[i]));
    }
    for (int i = 0; i < SPAWNERS; i++) ASSERT_OK(usched_join(t[i]));
    double secs = (double)(soak_now_ns() - t0) * 1e-9;
    uint64_t ran = 0;
    for (int i = 0; i < SPAWNERS; i++) {
        uint64_t per = (uint64_t)sp[i].n;
        CHECK_EQ("spawned children run by a spawner", atomic_load(&sp[i].ran), per);
        CHECK_EQ("spawn checksum of a spawner", atomic_load(&sp[i].sum), per * (per - 1) / 2);
        ran += atomic_load(&sp[i].ran);
    }
    CHECK_EQ("spawned fibers", ran, total);
    printf("  spawn  %11" PRIu64 " fibers, %d spawners, checksums ok  %7.2f s  %6.0f ns/spawn\n",
           ran, SPAWNERS, secs, secs * 1e9 / (double)ran);
}

/* ---- mutex ----------------------------------------------------------------------- */

static struct {
    usched_mutex_t m;
    long target;
    uint64_t counter; /* under m */
    uint64_t sum;     /* under m: sum of the counter values each holder saw */
    _Atomic uint64_t took;
} mx;

static void locker(void *arg)
{
    (void)arg;
    for (;;) {
        ASSERT_OK(usched_mutex_lock(&mx.m));
        if (mx.counter == (uint64_t)mx.target) {
            ASSERT_OK(usched_mutex_unlock(&mx.m));
            return;
        }
        mx.counter++;
        mx.sum += mx.counter;
        if ((mx.counter & 255) == 0) usched_yield(); /* hold it across a switch sometimes */
        ASSERT_OK(usched_mutex_unlock(&mx.m));
        atomic_fetch_add_explicit(&mx.took, 1, memory_order_relaxed);
    }
}

static void soak_mutex(usched_t *s)
{
    mx.target = sized(1e7);
    mx.counter = mx.sum = 0;
    atomic_store(&mx.took, 0);
    ASSERT_OK(usched_mutex_init(&mx.m));
    usched_task_t *t[LOCKERS];
    uint64_t t0 = soak_now_ns();
    for (int i = 0; i < LOCKERS; i++) ASSERT_OK(usched_spawn(s, &t[i], locker, NULL));
    for (int i = 0; i < LOCKERS; i++) ASSERT_OK(usched_join(t[i]));
    double secs = (double)(soak_now_ns() - t0) * 1e-9;
    uint64_t n = (uint64_t)mx.target;
    CHECK_EQ("mutex counter", mx.counter, n);
    CHECK_EQ("mutex checksum", mx.sum, n * (n + 1) / 2);
    CHECK_EQ("mutex increments counted outside", atomic_load(&mx.took), n);
    ASSERT_OK(usched_mutex_destroy(&mx.m));
    printf("  mutex  %11" PRIu64 " increments, %d fibers, checksum ok   %7.2f s  %6.0f ns/lock\n", n,
           LOCKERS, secs, secs * 1e9 / (double)n);
}

/* ---- sleep ----------------------------------------------------------------------- */

struct sleeper {
    long n;
    uint32_t rng;
    uint64_t slept, early, asked_ns;
};

static void sleeper(void *arg)
{
    struct sleeper *z = arg;
    for (long i = 0; i < z->n; i++) {
        z->rng = z->rng * 1103515245u + 12345u;
        uint64_t ns = (z->rng >> 8) % (MAX_SLEEP_NS + 1);
        uint64_t t0 = soak_now_ns();
        ASSERT_OK(usched_sleep_ns(ns));
        if (soak_now_ns() - t0 < ns) z->early++;
        z->slept++;
        z->asked_ns += ns;
    }
}

static void soak_sleep(usched_t *s)
{
    long total = sized(1e6);
    static struct sleeper z[SLEEPERS];
    static usched_task_t *t[SLEEPERS];
    uint64_t t0 = soak_now_ns();
    for (int i = 0; i < SLEEPERS; i++) {
        z[i] = (struct sleeper){.n = share(total, SLEEPERS, i), .rng = 0x9e3779b9u * (unsigned)(i + 1)};
        ASSERT_OK(usched_spawn(s, &t[i], sleeper, &z[i]));
    }
    for (int i = 0; i < SLEEPERS; i++) ASSERT_OK(usched_join(t[i]));
    double secs = (double)(soak_now_ns() - t0) * 1e-9;
    uint64_t slept = 0, asked = 0;
    for (int i = 0; i < SLEEPERS; i++) {
        CHECK_EQ("sleeps returning early", z[i].early, 0);
        CHECK_EQ("sleeps of a fiber", z[i].slept, z[i].n);
        slept += z[i].slept;
        asked += z[i].asked_ns;
    }
    CHECK_EQ("sleeps", slept, total);
    printf("  sleep  %11" PRIu64 " sleeps, %d fibers, none early     %7.2f s  (%.2f s asked per fiber)\n",
           slept, SLEEPERS, secs, (double)asked * 1e-9 / SLEEPERS);
}

/* ---- driver ---------------------------------------------------------------------- */

static int usage(const char *why)
{
    fprintf(stderr, "soak: %s\nusage: soak [--scale PCT] [--policy NAME] [--topology live|SRC] [--part primitives|servers]\n", why);
    return 2;
}

static void run(const char *policy, const char *topology)
{
    char buf[256];
    snprintf(buf, sizeof buf, "policy=%s topology=%s", policy, topology ? topology : "live");
    soak_label = buf;
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "policy", policy));
    if (topology) ASSERT_OK(usched_set(s, "topology", topology));
    ASSERT_OK(usched_start(s));
    printf("%s (%d CPUs)\n", soak_label, usched_ncpus(s));
    fflush(stdout);
    uint64_t t0 = soak_now_ns();
    if (!part || !strcmp(part, "primitives")) {
        soak_chan(s);
        soak_spawn(s);
        soak_mutex(s);
        soak_sleep(s);
    }
    /* the servers on the live machine only: over a virtual topology they
     * would measure the emulation more than the servers */
    if ((!part || !strcmp(part, "servers")) && !topology) soak_servers(s, sized(1e6), sized(1e4));
    ASSERT_OK(usched_destroy(s));
    printf("  total  %.2f s\n", (double)(soak_now_ns() - t0) * 1e-9);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    const char *policy = NULL, *topology = NULL;
    setvbuf(stdout, NULL, _IOLBF, 0); /* each line as it comes, into a log too */
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) return usage("an option needs a value");
        if (!strcmp(argv[i], "--scale")) {
            char *end;
            scale = strtod(argv[++i], &end);
            if (*end || !(scale > 0 && scale <= 100)) return usage("--scale: a percentage in (0, 100]");
        } else if (!strcmp(argv[i], "--policy")) {
            policy = argv[++i];
        } else if (!strcmp(argv[i], "--topology")) {
            topology = argv[++i];
        } else if (!strcmp(argv[i], "--part")) {
            part = argv[++i];
            if (strcmp(part, "primitives") && strcmp(part, "servers"))
                return usage("--part: 'primitives' or 'servers'");
        } else {
            return usage("unknown option");
        }
    }
    printf("soak at %g%% (chan %ld, spawn %ld, mutex %ld, sleep %ld; servers %ld requests and %ld hostile "
           "connections of each kind per protocol)\n",
           scale, sized(1e8), sized(1e7), sized(1e7), sized(1e6), sized(1e6), sized(1e4));
    uint64_t t0 = soak_now_ns();
    const char *topologies[] = {NULL, VIRTUAL};
    int ntopo = 2;
    if (topology) {
        topologies[0] = strcmp(topology, "live") ? topology : NULL;
        ntopo = 1;
    }
    for (int k = 0; k < ntopo; k++) {
        if (part && !strcmp(part, "servers") && topologies[k]) continue; /* the servers run live only */
        if (policy) {
            run(policy, topologies[k]);
            continue;
        }
        for (int p = 0; p < usched_policy_count(); p++) run(usched_policy_name(p), topologies[k]);
    }
    printf("soak: all counts and checksums exact, %.1f s\n", (double)(soak_now_ns() - t0) * 1e-9);
    return 0;
}
