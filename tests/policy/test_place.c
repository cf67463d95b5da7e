/*
 * Placement from every path under the default policy with smt=1: whatever
 * brings a fiber to a CPU - a spawn its parent does not join at once, a
 * spawn joined at once, a wake-up by a waker that keeps running, a sync
 * hand-off from a CPU beside a busy sibling, a steal, a pull from the global
 * queue - the fiber never starts
 * beside a busy SMT sibling while a whole core of the LLC is idle, except on
 * the deciding CPU of a hand-off whose fiber blocks (a join).
 *
 * Layout, in the LLC of CPU 0 (cores C0..Cn-1 of that LLC, by the topology):
 *   C0            both PUs busy: P runs the deciding fiber (the spawner or
 *                 waker), a spinner runs on P's sibling;
 *   C1..Cn-2      half busy: a spinner on one PU, the other PU idle ("half":
 *                 a CPU that must not get new work while Cn-1 idles);
 *   Cn-1          whole idle (the core the work belongs on).
 * Other LLCs stay idle; work may go there too (no busy sibling there).
 * Every round waits until a whole core of the LLC is idle again before it
 * decides, so each decision sees the layout (the waits are settles, not
 * timings; they fail after 30 s). Each scenario counts where its fibers
 * started: on P, on a half-busy CPU, elsewhere. Asserted: none on a
 * half-busy CPU; and the judge counters smt_busy_sibling,
 * steal_busy_sibling and global_busy_sibling stay zero where the layout cannot change under them.
 * With smt=0 (1x4x2 only) the counts are printed, not asserted: that is the
 * kernels' behaviour without SMT awareness.
 *
 * Topologies: 1x4x2 (`pack:1 l3:1 l2:4 core:1 pu:2`, the layout: spinners
 * on 0, 2, 4, P = 1, idle core 6-7), 2x6x2, and the captured Westmere-EP
 * (two packages, siblings N and N+12, CPUs alternating between packages).
 */
#include "core/core.h"
#include "core/idle.h"
#include "core/park.h"
#include "ptest.h"

#define MAXC 64
#define ROUNDS 12

enum { AT_P, AT_HALF, AT_FREE, NAT };
static const char *const at_name[NAT] = {"on P", "half-busy", "whole-idle core"};

struct layout {
    usched_t *s;
    usched__topo_t *t;
    int P;
    int busy[MAXC], nbusy; /* every busy CPU (spinners and P) */
    int half[MAXC], nhalf; /* the idle PUs of half-busy cores */
    struct pt_spinner sp[MAXC];
    int nsp;
    const uint64_t *llc;
};

static bool in(const int *v, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (v[i] == x) return true;
    return false;
}

static int where(const struct layout *l, int cpu)
{
    if (cpu == l->P) return AT_P;
    if (in(l->half, l->nhalf, cpu)) return AT_HALF;
    return AT_FREE;
}

/* Until a whole core of the LLC is idle (and, with `parked`, every CPU
 * outside the busy set is parked). */
static void settle(struct layout *l, bool parked)
{
    usched_t *s = l->s;
    for (int tries = 0; tries < 30000; tries++) {
        bool ok = usched__idlemask_find(usched__idle_cores(s), l->llc, 0) >= 0;
        for (int c = 0; c < s->ncpus && ok && parked; c++)
            if (!in(l->busy, l->nbusy, c) && atomic_load(&s->wk[c]->state) != WK_PARKED) ok = false;
        if (ok) return;
        usleep(1000);
    }
    TEST_FAIL_("the layout did not settle (a whole idle core%s) within 30 s",
               parked ? ", idle CPUs parked" : "");
}

static void layout_start(struct layout *l, const char *topo, int smt)
{
    char knobs[64];
    /* Placement only: no preemption, which would run a child queued on the
     * busy CPU P there once P's fiber had run its slice. */
    snprintf(knobs, sizeof knobs, "smt=%d,preempt_us=0", smt);
    memset(l, 0, sizeof *l);
    l->t = pt_topo_load(topo);
    l->s = pt_start("usched", topo, knobs);
    int cores[MAXC];
    int n = pt_llc_cores(l->t, 0, cores, MAXC);
    ASSERT_GE(n, 3);
    l->llc = usched__topo_group_mask(l->t, TOPO_LLC, usched__topo_group(l->t, 0, TOPO_LLC));
    /* C0: a spinner on its first PU, P = its sibling */
    l->P = pt_sibling(l->t, cores[0]);
    ASSERT_GE(l->P, 0);
    l->busy[l->nbusy++] = l->P;
    for (int i = 0; i < n - 1; i++) {
        pt_spin_start(l->s, &l->sp[l->nsp++], cores[i]);
        l->busy[l->nbusy++] = cores[i];
        if (i > 0) l->half[l->nhalf++] = pt_sibling(l->t, cores[i]);
    }
    for (int i = 0; i < l->nsp; i++) pt_spin_wait(&l->sp[i]);
}

static void layout_stop(struct layout *l)
{
    for (int i = 0; i < l->nsp; i++) pt_spin_stop(&l->sp[i]);
    ASSERT_OK(usched_destroy(l->s));
    usched__topo_free(l->t);
}

/* ---- the scenarios: each runs a fiber bound on P ------------------------------ */

struct scen {
    struct layout *l;
    int kind;
    int at[NAT];
    _Atomic int cpu;   /* where the last child or wakee started */
    _Atomic int done;  /* scenario fiber finished */
    struct pt_mbox mb, back;
    _Atomic int stop, started;
};

static void child_fn(void *arg)
{
    struct scen *sc = arg;
    atomic_store(&sc->cpu, usched_self_cpu());
}

/* Spawns ROUNDS children one at a time and keeps running (join later). */
static void spawn_running(struct scen *sc)
{
    usched_t *s = sc->l->s;
    for (int r = 0; r < ROUNDS; r++) {
        settle(sc->l, r & 1); /* odd rounds: the idle CPUs parked; even: maybe spinning */
        atomic_store(&sc->cpu, -1);
        usched_task_t *c;
        ASSERT_OK(usched_spawn(s, &c, child_fn, sc));
        while (atomic_load(&sc->cpu) < 0) __asm__ volatile("" ::: "memory");
        sc->at[where(sc->l, atomic_load(&sc->cpu))]++;
        ASSERT_OK(usched_join(c)); /* it has run: the join does not block for long */
    }
}

/* Spawns a child and joins it at once, ROUNDS times. */
static void spawn_join(struct scen *sc)
{
    usched_t *s = sc->l->s;
    for (int r = 0; r < ROUNDS; r++) {
        settle(sc->l, r & 1);
        atomic_store(&sc->cpu, -1);
        usched_task_t *c;
        ASSERT_OK(usched_spawn(s, &c, child_fn, sc));
        ASSERT_OK(usched_join(c));
        sc->at[where(sc->l, atomic_load(&sc->cpu))]++;
    }
}

/* The wakee: waits on sc->mb, records where it woke, tells the waker. */
static void wakee_fn(void *arg)
{
    struct scen *sc = arg;
    atomic_store(&sc->started, 1);
    for (;;) {
        pt_mb_wait(&sc->mb);
        if (atomic_load(&sc->stop)) return;
        atomic_store(&sc->cpu, usched_self_cpu());
        pt_mb_post(&sc->back, sc->kind == 3 ? USCHED_SEL_SYNC : 0);
    }
}

/* kind 2: P wakes the wakee and keeps running (it spins for the answer);
 * kind 3: P and the wakee hand off with the SYNC hint, each blocking. */
static void wakeups(struct scen *sc)
{
    usched_t *s = sc->l->s;
    usched_task_t *j;
    ASSERT_OK(usched_spawn(s, &j, wakee_fn, sc));
    while (!atomic_load(&sc->started)) __asm__ volatile("" ::: "memory"); /* taken by a thief */
    for (int r = 0; r < ROUNDS; r++) {
        settle(sc->l, r & 1);
        atomic_store(&sc->cpu, -1);
        if (sc->kind == 3) {
            pt_mb_post(&sc->mb, USCHED_SEL_SYNC);
            pt_mb_wait(&sc->back);
        } else {
            pt_mb_post(&sc->mb, 0);
            while (atomic_load(&sc->cpu) < 0) __asm__ volatile("" ::: "memory");
            pt_mb_wait(&sc->back);
        }
        sc->at[where(sc->l, atomic_load(&sc->cpu))]++;
    }
    /* The stop is a wake-up too, judged like the rounds': settled first.
     * Unsettled, the wakee's CPU could still be busy going idle when the
     * policy looked and idle when the judge did (a TSan run in CI counted
     * one smt_busy_sibling so). */
    settle(sc->l, false);
    atomic_store(&sc->stop, 1);
    pt_mb_post(&sc->mb, 0);
    ASSERT_OK(usched_join(j));
}

/* Steal: P queues one fiber per idle CPU, each spinning until released (so
 * no core becomes idle again under a thief's judgement), and keeps running;
 * thieves take them, so in the end every idle CPU runs one. What is judged
 * is the order: no steal beside a busy sibling while a whole core idled
 * (steal_busy_sibling). */
struct hog {
    struct scen *sc;
    _Atomic int cpu;
};
static _Atomic int hogs_release;

static void hog_fn(void *arg)
{
    struct hog *h = arg;
    atomic_store(&h->cpu, usched_self_cpu());
    while (!atomic_load_explicit(&hogs_release, memory_order_relaxed)) __asm__ volatile("" ::: "memory");
}

static void steal(struct scen *sc)
{
    usched_t *s = sc->l->s;
    struct hog h[MAXC];
    usched_task_t *tk[MAXC];
    const int K = s->ncpus - sc->l->nbusy;
    ASSERT_LE(K, MAXC);
    atomic_store(&hogs_release, 0);
    settle(sc->l, true);
    ASSERT_OK(usched_stats_reset(s));
    for (int i = 0; i < K; i++) {
        h[i].sc = sc;
        atomic_store(&h[i].cpu, -1);
        ASSERT_OK(usched_spawn(s, &tk[i], hog_fn, &h[i]));
    }
    for (int tries = 0;; tries++) {
        int started = 0;
        for (int i = 0; i < K; i++) started += atomic_load(&h[i].cpu) >= 0;
        if (started == K) break;
        if (tries == 30000) {
            for (int c = 0; c < s->ncpus; c++)
                printf("cpu %d state %u ring %u next %p idle %d\n", c, atomic_load(&s->wk[c]->state),
                       usched__ring_len(&s->wk[c]->ring), (void *)atomic_load(&s->wk[c]->next),
                       usched__idlemask_test(&s->idle_cpus, c));
            TEST_FAIL_("only %d of %d hogs started within 30 s", started, K);
        }
        usleep(1000);
    }
    for (int i = 0; i < K; i++)
        if (atomic_load(&h[i].cpu) >= 0) sc->at[where(sc->l, atomic_load(&h[i].cpu))]++;
    atomic_store(&hogs_release, 1);
    for (int i = 0; i < K; i++) ASSERT_OK(usched_join(tk[i]));
}

/* The global queue (where a full ring spills and outside spawns may go): P
 * spawns a child without waking a CPU for it and takes it back out of its
 * next slot before anyone runs it, then puts it on the global queue and
 * wakes one half-busy CPU only (the first awake CPU to look). The
 * smt rule makes that CPU leave the fiber to the whole idle core
 * (global_deferred); without it, that CPU pulls it and runs it beside its
 * busy sibling. A round whose child a thief took from the next slot first
 * is not counted (it is the steal scenario) and is tried again. */
static void global_queue(struct scen *sc)
{
    usched_t *s = sc->l->s;
    struct usched__wk *pw = s->wk[sc->l->P];
    for (int r = 0, tries = 0; r < ROUNDS; tries++) {
        ASSERT_LT(tries, 10 * ROUNDS);
        settle(sc->l, true);
        atomic_store(&sc->cpu, -1);
        usched_task_t *c;
        /* No CPU woken for the spawn (s->park.waking, the flag that keeps a
         * burst of spawns from waking every CPU, held): a woken CPU would
         * take the child from the next slot while the host kernel runs it
         * instead of P's thread. */
        uint32_t zero = 0;
        while (!atomic_compare_exchange_weak(&s->park.waking, &zero, 1)) zero = 0;
        ASSERT_OK(usched_spawn(s, &c, child_fn, sc));
        struct usched_task *exp = c;
        bool held = atomic_compare_exchange_strong(&pw->next, &exp, NULL);
        atomic_store(&s->park.waking, 0);
        if (!held) {
            while (atomic_load(&sc->cpu) < 0) __asm__ volatile("" ::: "memory");
            ASSERT_OK(usched_join(c));
            continue;
        }
        usched__gq_push(s, c);
        usched__wk_kick(s, pw, sc->l->half[r % sc->l->nhalf]);
        while (atomic_load(&sc->cpu) < 0) __asm__ volatile("" ::: "memory");
        sc->at[where(sc->l, atomic_load(&sc->cpu))]++;
        ASSERT_OK(usched_join(c));
        r++;
    }
}

static const char *const kind_name[] = {"spawn, parent runs on", "spawn and join", "wake-up, waker runs on",
                                        "sync hand-off", "steal", "global queue"};
#define NKINDS 6

static void scen_fn(void *arg)
{
    struct scen *sc = arg;
    switch (sc->kind) {
    case 0: spawn_running(sc); break;
    case 1: spawn_join(sc); break;
    case 2:
    case 3: wakeups(sc); break;
    case 4: steal(sc); break;
    default: global_queue(sc); break;
    }
    atomic_store(&sc->done, 1);
}

static void run(const char *topo, int smt, int kind)
{
    struct layout l;
    layout_start(&l, topo, smt);
    struct scen sc = {.l = &l, .kind = kind};
    if (kind != 4) {
        settle(&l, false);
        ASSERT_OK(usched_stats_reset(l.s));
    }
    usched_task_t *f;
    ASSERT_OK(usched_spawn_on(l.s, &f, l.P, scen_fn, &sc));
    ASSERT_OK(usched_join(f));
    ASSERT(atomic_load(&sc.done));
    uint64_t sib = pt_stat(l.s, "smt_busy_sibling"), ssib = pt_stat(l.s, "steal_busy_sibling");
    uint64_t deferred = pt_stat(l.s, "steal_deferred"), woke_core = pt_stat(l.s, "wake_idle_core");
    uint64_t gdef = pt_stat(l.s, "global_deferred"), gsib = pt_stat(l.s, "global_busy_sibling");
    printf("%-44.44s smt=%d P=%-2d %-22s %s %d, %s %d, %s %d; smt_busy_sibling=%llu "
           "steal_busy_sibling=%llu steal_deferred=%llu wake_idle_core=%llu global_deferred=%llu "
           "global_busy_sibling=%llu\n",
           topo, smt, l.P, kind_name[kind], at_name[AT_P], sc.at[AT_P], at_name[AT_HALF], sc.at[AT_HALF],
           at_name[AT_FREE], sc.at[AT_FREE], (unsigned long long)sib, (unsigned long long)ssib,
           (unsigned long long)deferred, (unsigned long long)woke_core, (unsigned long long)gdef,
           (unsigned long long)gsib);
    int total = sc.at[AT_P] + sc.at[AT_HALF] + sc.at[AT_FREE];
    if (kind != 4) ASSERT_EQ(total, ROUNDS);
    if (kind == 4) {
        ASSERT_EQ(total, l.s->ncpus - l.nbusy); /* every idle CPU took one */
        ASSERT_EQ(sc.at[AT_P], 0);
        if (smt) ASSERT_EQ_U(ssib, 0);
    } else if (smt) {
        ASSERT_EQ(sc.at[AT_HALF], 0);
        /* Only a join runs its child on P (P blocks: a hand-off); a fiber
         * that keeps P busy leaves its work to others. */
        if (kind != 1) ASSERT_EQ(sc.at[AT_P], 0);
        if (kind == 2 || kind == 3) ASSERT_EQ_U(sib, 0);
        if (kind == 5) {
            ASSERT_EQ_U(gsib, 0);
            ASSERT(gdef > 0); /* the woken half-busy CPU looked first and left it */
        }
    }
    layout_stop(&l);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    static const char *const topos[] = {
        "pack:1 l3:1 l2:4 core:1 pu:2",
        "pack:2 l3:1 l2:6 core:1 pu:2",
        USCHED_TOPOLOGIES_DIR "/sysfs/24em64t-2n6c2t+2mic.olddriver.lstopo-2.9.xml",
    };
    for (size_t i = 0; i < sizeof topos / sizeof topos[0]; i++) {
        if (access(topos[i], R_OK) != 0 && topos[i][0] == '/') {
            printf("skipping %s: not found\n", topos[i]);
            continue;
        }
        for (int kind = 0; kind < NKINDS; kind++) run(topos[i], 1, kind);
    }
    for (int kind = 0; kind < NKINDS; kind++) run(topos[0], 0, kind);
    printf("ok\n");
    return 0;
}
