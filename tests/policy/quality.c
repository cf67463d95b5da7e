/*
 * The `pairs` workload's placement quality per policy: N request/response
 * pairs (N = half the cores) on the 2x6x2 virtual topology
 * `pack:2 l3:1 l2:6 core:1 pu:2` (24 CPUs, 12 cores, 2 LLCs), each pair
 * exchanging R round trips (argument 1, default 2000) with a SYNC hand-off,
 * under every policy with smt=1 and smt=0. Prints, per run, the wake-ups and
 * the two quality counters: smt_busy_sibling (placed beside a busy sibling
 * while a whole core idled in the LLC) and wake_cross_llc (placed outside
 * the LLCs of prev and waker while they had an idle CPU), plus where the
 * wake-ups went. A benchmark, built but not run by CTest: it reports numbers
 * and asserts only that every message arrived.
 */
#include "ptest.h"

#define TOPO "pack:2 l3:1 l2:6 core:1 pu:2"
#define NPAIRS 6

struct pair {
    struct pt_mbox mb[2];
    long rounds;
    _Atomic long msgs;
};

struct side {
    struct pair *p;
    int me;
};

static void side_fn(void *arg)
{
    struct side *sd = arg;
    struct pair *p = sd->p;
    int me = sd->me;
    for (long i = 0; i < p->rounds; i++) {
        if (me == 1 || i > 0) pt_mb_wait(&p->mb[me]);
        atomic_fetch_add(&p->msgs, 1);
        if (!(me == 1 && i == p->rounds - 1)) pt_mb_post(&p->mb[1 - me], USCHED_SEL_SYNC);
    }
}

static void run(const char *policy, int smt, long rounds)
{
    char knobs[32];
    snprintf(knobs, sizeof knobs, "smt=%d", smt);
    usched_t *s = pt_start(policy, TOPO, knobs);
    struct pair p[NPAIRS];
    struct side sd[NPAIRS][2];
    usched_task_t *t[NPAIRS][2];
    memset(p, 0, sizeof p);
    for (int i = 0; i < NPAIRS; i++) {
        p[i].rounds = rounds;
        for (int k = 1; k >= 0; k--) {
            sd[i][k] = (struct side){&p[i], k};
            ASSERT_OK(usched_spawn(s, &t[i][k], side_fn, &sd[i][k]));
        }
    }
    double t0 = test_now();
    for (int i = 0; i < NPAIRS; i++)
        for (int k = 0; k < 2; k++) ASSERT_OK(usched_join(t[i][k]));
    double dt = test_now() - t0;
    for (int i = 0; i < NPAIRS; i++) ASSERT_EQ(atomic_load(&p[i].msgs), 2 * rounds);
    uint64_t wakes = 0;
    static const char *const reasons[] = {"sync", "prev", "local", "idle_core", "idle_smt",
                                          "idle_l2", "idle_llc", "idle_package", "idle_numa",
                                          "idle_machine", "least_loaded", "stacked", "shared"};
    for (size_t r = 0; r < sizeof reasons / sizeof reasons[0]; r++) {
        char name[40];
        snprintf(name, sizeof name, "place_%s", reasons[r]);
        wakes += pt_stat(s, name);
    }
    printf("%-7s smt=%d  smt_busy_sibling=%-7llu wake_cross_llc=%-7llu placements=%-8llu "
           "sync=%-7llu idle_core=%-6llu stacked=%-6llu shared=%-7llu %.0f rt/s\n",
           policy, smt, (unsigned long long)pt_stat(s, "smt_busy_sibling"),
           (unsigned long long)pt_stat(s, "wake_cross_llc"), (unsigned long long)wakes,
           (unsigned long long)pt_stat(s, "place_sync"), (unsigned long long)pt_stat(s, "place_idle_core"),
           (unsigned long long)pt_stat(s, "place_stacked"), (unsigned long long)pt_stat(s, "place_shared"),
           (double)(NPAIRS * rounds) / dt);
    ASSERT_OK(usched_destroy(s));
}

int main(int argc, char **argv)
{
    long rounds = test_scale(argc > 1 ? atol(argv[1]) : 2000);
    printf("pairs: %d pairs x %ld round trips on %s\n", NPAIRS, rounds, TOPO);
    static const char *const pols[] = {"usched", "linux", "ule", "bsd4", "global"};
    for (size_t i = 0; i < sizeof pols / sizeof pols[0]; i++)
        for (int smt = 1; smt >= 0; smt--) run(pols[i], smt, rounds);
    return 0;
}
