/*
 * Stealing under the default policy, on `pack:2 l3:1 l2:2 core:1 pu:2`
 * (8 CPUs: LLC 0 = 0-3, LLC 1 = 4-7). Every CPU but the thief T = 1 is busy
 * with a spinning bound fiber; the spinners of S = 0 (T's SMT sibling) and
 * R = 4 (another LLC) queue K unbound and K bound fibers each on their own
 * CPU. Then T's spinner stops and T steals: the first fiber T runs comes from
 * its sibling S, the steal counters say "smt" before "machine", no bound
 * fiber runs anywhere but on its CPU, and the steals counted beyond the LLC
 * are those that moved fibers to the other package.
 */
#include "ptest.h"

#define TOPO "pack:2 l3:1 l2:2 core:1 pu:2"
#define K 6

struct rec {
    int tag;        /* CPU whose queue it was spawned on */
    int bound;      /* bound CPU or -1 */
    _Atomic int cpu;
    _Atomic long seq;
};

static _Atomic long seq;
static _Atomic int queued, started;

static void rec_fn(void *arg)
{
    struct rec *r = arg;
    atomic_store(&r->cpu, usched_self_cpu());
    atomic_store(&r->seq, atomic_fetch_add(&seq, 1));
}

struct filler {
    struct pt_spinner sp;
    struct rec *recs; /* 2K: K unbound, then K bound */
};

static void filler_fn(void *arg)
{
    struct filler *f = arg;
    usched_t *s = usched_self();
    /* Both fillers run before either spawns: with R's CPU still idle, a
     * placement may send S's children there (seen on a loaded machine). */
    atomic_fetch_add(&started, 1);
    while (atomic_load(&started) < 2) __asm__ volatile("" ::: "memory");
    for (int i = 0; i < 2 * K; i++) {
        f->recs[i].tag = f->sp.cpu;
        f->recs[i].bound = i < K ? -1 : f->sp.cpu;
        atomic_store(&f->recs[i].cpu, -1);
        if (i < K)
            ASSERT_OK(usched_spawn(s, NULL, rec_fn, &f->recs[i]));
        else
            ASSERT_OK(usched_spawn_on(s, NULL, f->sp.cpu, rec_fn, &f->recs[i]));
    }
    atomic_fetch_add(&queued, 1);
    atomic_store(&f->sp.running, 1);
    while (!atomic_load_explicit(&f->sp.stop, memory_order_relaxed)) __asm__ volatile("" ::: "memory");
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    usched_t *s = pt_start("usched", TOPO, "spin_us=0");
    int n = usched_ncpus(s);
    ASSERT_EQ(n, 8);
    const int T = 1, S = 0, R = 4;
    struct pt_spinner sp[8];
    for (int c = 0; c < n; c++)
        if (c != S && c != R) pt_spin_start(s, &sp[c], c);
    for (int c = 0; c < n; c++)
        if (c != S && c != R) pt_spin_wait(&sp[c]);
    static struct rec recs[2][2 * K];
    struct filler f[2] = {{.recs = recs[0]}, {.recs = recs[1]}};
    const int fc[2] = {S, R};
    for (int i = 0; i < 2; i++) {
        f[i].sp.cpu = fc[i];
        ASSERT_OK(usched_spawn_on(s, &f[i].sp.task, fc[i], filler_fn, &f[i]));
    }
    while (atomic_load(&queued) < 2) usleep(100);
    ASSERT_OK(usched_stats_reset(s));
    atomic_store(&seq, 0);
    pt_spin_stop(&sp[T]); /* T idles, and steals */
    /* T runs every unbound fiber of S; R keeps one it may not give (load 1 < steal_thresh) */
    for (;;) {
        int done = 0;
        for (int i = 0; i < K; i++) done += atomic_load(&recs[0][i].cpu) >= 0;
        if (done == K) break;
        usleep(100);
    }
    for (int c = 0; c < n; c++)
        if (c != S && c != R && c != T) pt_spin_stop(&sp[c]);
    for (int i = 0; i < 2; i++) {
        atomic_store(&f[i].sp.stop, 1);
        ASSERT_OK(usched_join(f[i].sp.task));
    }
    ASSERT_OK(usched_wait(s));

    long first_seq = -1;
    int first_tag = -1;
    for (int q = 0; q < 2; q++)
        for (int i = 0; i < 2 * K; i++) {
            struct rec *r = &recs[q][i];
            if (r->bound >= 0) ASSERT_EQ(atomic_load(&r->cpu), r->bound); /* never stolen */
            if (atomic_load(&r->cpu) == T && (first_seq < 0 || atomic_load(&r->seq) < first_seq)) {
                first_seq = atomic_load(&r->seq);
                first_tag = r->tag;
            }
        }
    uint64_t smt = pt_stat(s, "steal_smt"), far = pt_stat(s, "steal_machine") +
                                                  pt_stat(s, "steal_numa") + pt_stat(s, "steal_package");
    /* Only unbound fibers move, so a steal beyond the LLC (here: from the
     * other package, CPUs 0-3 against 4-7) is one that moved at least one
     * of them there, and every fiber that ran in the other package than the
     * queue it was spawned on got there by such a steal. */
    long moved = 0;
    for (int q = 0; q < 2; q++)
        for (int i = 0; i < 2 * K; i++) moved += atomic_load(&recs[q][i].cpu) / 4 != recs[q][i].tag / 4;
    printf("first fiber run by the thief came from cpu %d; steal_smt=%llu beyond the LLC=%llu, moving %ld fibers\n",
           first_tag, (unsigned long long)smt, (unsigned long long)far, moved);
    ASSERT_EQ(first_tag, S);
    ASSERT_GE(smt, 1);
    ASSERT_EQ(far > 0, moved > 0);
    ASSERT_LE(far, (uint64_t)moved);
    ASSERT_OK(usched_destroy(s));
    printf("ok\n");
    return 0;
}
