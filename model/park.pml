/*
 * A model of usched's park/wake protocol for the SPIN model checker
 * (docs/model.md says what it covers and what it abstracts). Each step that
 * exists to prevent a lost wake-up carries a label "[model: " NAME "]" here and in
 * the code's comment for that step (model/labels.sh checks both ways), and a
 * mutant macro MUT_NAME that removes it; model/run.sh checks the model and
 * then each mutant, which must give a counterexample.
 *
 * The world: N workers (sched.c: find_work), each with an inbox, a next slot
 * and a ring; one global queue; fibers that hand work on (spawn into the
 * next slot, a wake-up into another CPU's inbox, a push on the global queue)
 * and then finish, or compute for ever (a hog: the case the stall monitor
 * exists for); an outside thread that spawns (or, with NO_OUTSIDE, a fiber
 * on the global queue at the start); the stall monitor, which looks once
 * per period and sleeps while every worker is parked. Numbers of fibers
 * are counts: the protocol never looks at which fiber is where. SPAWNS_ONLY
 * leaves the fibers only their spawns (the three-worker configuration).
 *
 * Memory order: SPIN interleaves sequentially consistently. The code's plain
 * stores that matter (an owner's put into its next slot or ring) go into a
 * per-CPU store buffer that other CPUs cannot see until the owner fences or
 * the buffer drains by itself (a drainer process, at any later time), as on
 * x86-64 (TSO) and, for these stores, on aarch64. A seq_cst store followed by
 * a full fence (P1, P2) is visible before the next load; a mutant without the
 * fence lets the store become visible after the loads of P3.
 */
#ifndef N
#define N 2          /* workers */
#endif
#ifndef NF
#define NF 3         /* hand-offs the fibers may make in all */
#endif
#ifndef NHOG
#define NHOG 1       /* fibers that compute for ever */
#endif

#if N == 2
#define SB_ANY (sb_nxt[0] + sb_ring[0] + sb_nxt[1] + sb_ring[1] > 0)
#elif N == 3
#define SB_ANY (sb_nxt[0] + sb_ring[0] + sb_nxt[1] + sb_ring[1] + sb_nxt[2] + sb_ring[2] > 0)
#else
#error "the model has N = 2 or 3 workers"
#endif

#define RUNNING 0
#define PARKED  1

byte state[N];                  /* wk->state */
byte nparked, nspinning, waking;
byte inbox[N], nxt[N], ring[N]; /* visible to every CPU */
byte sb_nxt[N], sb_ring[N];     /* the owner's plain puts, not yet visible to others */
bool nxt_spawn[N];              /* wk->next_spawn: the next slot holds a spawn */
bool current[N];                /* a fiber runs on the CPU (wk->current) */
bool hogging[N];                /* ... and never yields: the monitor sees a stall */
byte gq;                        /* the global queue */
byte budget = NF;               /* hand-offs still to make */
byte hogs_left = NHOG;
bool mon_idle;                  /* the monitor sleeps (M1-M3) */

/* ---- helpers ---------------------------------------------------------------- */

/* Work CPU `me` could run or steal, as P3 and the spinner's chain test look
 * (sched.c, work_visible): its own queues (its own buffered puts included),
 * the global queue, other CPUs' rings, and a spawn in the next slot of a CPU
 * running a fiber. One atomic look: the model does not split its loads. */
#define OWN(me)  (inbox[me] + nxt[me] + sb_nxt[me] + ring[me] + sb_ring[me])
#define STEAL(me, c) ((c) != (me) && (ring[c] > 0 || (nxt[c] > 0 && nxt_spawn[c] && current[c])))

inline work_visible(me, r)
{
    d_step {
        r = (OWN(me) > 0 || gq > 0);
        c = 0;
        do
        :: c < N -> r = r || STEAL(me, c); c++
        :: else -> break
        od;
        c = 0
    }
}

/* The store buffer of CPU `me` empties (a full fence, or a locked
 * instruction, by the owner). */
inline flush(me)
{
    d_step { nxt[me] = nxt[me] + sb_nxt[me]; sb_nxt[me] = 0;
             ring[me] = ring[me] + sb_ring[me]; sb_ring[me] = 0 }
}

/* One fiber for CPU `me`: find_local (inbox, next slot, ring), the global
 * queue, then a steal (ring, or a spawn in a running CPU's next slot). One
 * atomic step: each take is a CAS or an exchange in the code, and the order
 * of the looks does not matter to the protocol (docs/model.md). */
inline try_all(me, got)
{
    d_step {
        got = 1;
        if
        :: inbox[me] > 0 -> inbox[me]--
        :: else -> if
            :: sb_nxt[me] > 0 -> sb_nxt[me]--
            :: else -> if
                :: nxt[me] > 0 -> nxt[me]--
                :: else -> if
                    :: sb_ring[me] > 0 -> sb_ring[me]--
                    :: else -> if
                        :: ring[me] > 0 -> ring[me]--
                        :: else -> if
                            :: gq > 0 -> gq--
                            :: else ->
                                got = 0;
                                c = 0;
                                do
                                :: c < N && !got ->
                                    if
                                    :: c != me && ring[c] > 0 -> ring[c]--; got = 1
                                    :: c != me && ring[c] == 0 && nxt[c] > 0 && nxt_spawn[c] && current[c] ->
                                        nxt[c]--; got = 1
                                    :: else -> skip
                                    fi;
                                    c++
                                :: else -> break
                                od;
                                c = 0
                            fi
                        fi
                    fi
                fi
            fi
        fi
    }
}

/* Leaving PARKED, by the CPU itself or a waker (sched.c unpark and
 * usched__wk_wake_parked): the CAS and nparked--, then W-M: wake the
 * monitor if it sleeps [model: WM]. */
inline leave_parked(cpu, ok)
{
    atomic {
        if
        :: state[cpu] == PARKED -> state[cpu] = RUNNING; nparked--; ok = 1
        :: else -> ok = 0
        fi
    };
#ifndef MUT_WM
    if
    :: ok && mon_idle -> mon_idle = 0
    :: else -> skip
    fi
#endif
}

/* W3: wake `cpu` if it is parked (queue.h, usched__wk_kick) [model: W3]. */
inline kick(cpu, ok)
{
#ifndef MUT_W3
    if
    :: state[cpu] == PARKED -> leave_parked(cpu, ok)
    :: else -> ok = 0
    fi
#else
    ok = 0
#endif
}

/* wakep (sched.c): wake one parked CPU when nobody spins and no such
 * wake-up is in flight; the woken CPU clears `waking`. */
inline wakep_body(ok)
{
    ok = 0;
    if
    :: nspinning == 0 && nparked > 0 && waking == 0 ->
        atomic { if :: waking == 0 -> waking = 1; ok = 1 :: else -> skip fi };
        if
        :: ok ->
            ok = 0;
            w = 0;
            do
            :: w < N && !ok -> if
                               :: state[w] == PARKED -> leave_parked(w, ok)
                               :: else -> skip
                               fi;
                               w++
            :: else -> break
            od;
            w = 0;
            if
            :: !ok ->
                waking = 0;
                /* WP3: a CPU may have parked after the scan while another
                 * waker, seeing `waking`, left the wake-up to this one:
                 * look once more [model: WP3] */
#ifndef MUT_WP3
                do
                :: w < N && !ok -> if
                                   :: state[w] == PARKED -> leave_parked(w, ok)
                                   :: else -> skip
                                   fi;
                                   w++
                :: else -> break
                od;
                w = 0
#endif
            :: else -> skip
            fi
        :: else -> skip
        fi
    :: else -> skip
    fi
}

/* wakep by a worker: its fence [model: WP1] first makes the worker's plain
 * puts visible before wakep reads nspinning. (The outside thread and the
 * monitor publish with locked instructions and call wakep_body.) */
inline wakep(me, ok)
{
#ifndef MUT_WP1
    flush(me);
#endif
    wakep_body(ok)
}

/* ---- a worker ------------------------------------------------------------------ */

proctype worker(byte me)
{
    bool got, ok, vis, spinning, handoff, spawn_woke;
    byte c, w, old, t;

top:
    try_all(me, got);
    if
    :: got -> goto exec
    :: else -> skip
    fi;
    do
    :: atomic { got = 0; vis = 0; ok = 0 };
       /* spin, if fewer than half of the awake CPUs spin, or after a hand-off */
        atomic {
            if
            :: 2 * nspinning < N - nparked || handoff -> nspinning++; spinning = 1
            :: else -> skip
            fi;
            handoff = 0
        };
        if
        :: spinning ->
            do
            :: try_all(me, got);
               if
               :: got ->
                   atomic { old = nspinning; nspinning-- };
                   spinning = 0;
                   /* the last spinner to find work wakes another [model: SC] */
                   if
                   :: old == 1 ->
                       work_visible(me, vis);
#ifndef MUT_SC
                       if :: vis -> wakep(me, ok) :: else -> skip fi
#endif
                   :: else -> skip
                   fi;
                   old = 0;
                   goto exec
               :: else -> skip
               fi
            :: break   /* the spin ran out */
            od;
            nspinning--;
            spinning = 0
        :: else -> skip
        fi;
        /* P1: nparked first, then the state [model: P1] */
        nparked++;
#ifndef MUT_P2
        state[me] = PARKED;
        /* P2: full fence [model: P2] */
        flush(me);
        /* P3: re-check [model: P3] */
        work_visible(me, vis);
#else
        /* without P2's fence the seq_cst store may pass P3's loads */
        work_visible(me, vis);
        state[me] = PARKED;
#endif
#ifdef MUT_P3
        vis = 0;
#endif
        if
        :: vis ->
            leave_parked(me, ok);
            waking = 0;
            ok = 0;
            try_all(me, got);
            if
            :: got ->
                work_visible(me, vis);
                /* work left after the re-check found some: chain [model: P3C] */
#ifndef MUT_P3C
                if :: vis -> wakep(me, ok) :: else -> skip fi;
#endif
                goto exec
            :: else -> skip
            fi
        :: else ->
            /* P4: futex_wait(state, PARKED) */
end_park:   (state[me] != PARKED);
            leave_parked(me, ok);
            waking = 0;
            ok = 0
        fi
    od;

exec:
    atomic { got = 0; vis = 0; ok = 0; current[me] = 1 };
    spawn_woke = 0;
    do
    :: atomic { budget > 0 -> budget-- };
        if
        :: /* a spawn into the next slot (the one there moves to the ring):
            * plain stores, then wakep unless a burst (place.c) */
            nxt_spawn[me] = 1;
            if
            :: nxt[me] + sb_nxt[me] == 0 -> sb_nxt[me]++
            :: else -> sb_ring[me]++
            fi;
            if
            :: !spawn_woke || ring[me] + sb_ring[me] <= 1 -> spawn_woke = 1; wakep(me, ok)
            :: else -> skip
            fi
#ifndef SPAWNS_ONLY
        :: /* W1-W3: a wake-up into another CPU's inbox [model: W2]:
            * the push is a seq_cst exchange, so W3's load follows it */
            select(t : 0 .. N - 1);
            if
            :: t != me ->
                handoff = 1;
#ifndef MUT_W2
                inbox[t]++;
                kick(t, ok)
#else
                kick(t, ok);
                inbox[t]++
#endif
            :: else ->
                /* a sync hand-off on this CPU: the next slot (not a spawn,
                 * so not stealable there), wakep, and the waker blocks */
                nxt_spawn[me] = 0;
                if
                :: nxt[me] + sb_nxt[me] == 0 -> sb_nxt[me]++
                :: else -> sb_ring[me]++
                fi;
                wakep(me, ok);
                t = 0;
                break
            fi;
            t = 0
        :: /* the shared run queue; the policy names a CPU to kick: one
            * that runs no fiber when it decides (global.c: the first idle
            * CPU), else this CPU; when that is this CPU, wakep [model: GQW] */
            atomic {
                t = 0;
                do
                :: t < N && (t == me || !current[t]) -> break
                :: t < N -> t++
                :: else -> t = me; break
                od
            };
            gq++;
            if
            :: t != me ->
                kick(t, ok);
                /* [model: GQK] when the named CPU was not parked (it took
                 * other work since the policy looked), wake one that is */
#ifndef MUT_GQK
                if :: !ok -> wakep(me, ok) :: else -> skip fi
#endif
                skip
            :: else ->
#ifndef MUT_GQW
                wakep(me, ok)
#else
                skip
#endif
            fi;
            t = 0
#endif
        fi;
        ok = 0
    :: atomic { hogs_left > 0 -> hogs_left--; hogging[me] = 1 };
end_hog: false   /* computes for ever: only the monitor helps its queues */
    :: break
    od;
    current[me] = 0;
    goto top
}

/* A CPU's store buffer drains by itself, at any time. */
proctype drainer()
{
    byte i;
end_drain:
    do
    :: atomic { SB_ANY -> select(i : 0 .. N - 1); flush(i); i = 0 }
    od
}

/* The stall monitor (monitor.c). A look: seeing a stalled CPU (here: a hog)
 * with queued work, it moves its inbox to the global queue (M4) and wakes a
 * parked CPU to take it or steal (M5) [model: M5]. Then, when every worker
 * is parked, it sleeps: M1 mon_idle = 1, M2 re-read nparked [model: M2],
 * M3 wait; a worker leaving PARKED wakes it (W-M, in leave_parked).
 * Otherwise it waits for its period (stall_us / 2), long beside the
 * protocol's steps: the next look comes when nothing else can move (SPIN's
 * timeout), or, NEARLY times in a run, at any moment, racing the workers. */
#ifndef NEARLY
#define NEARLY 1
#endif
proctype monitor()
{
    byte c, w, i;
    bool ok;
    byte early = NEARLY;
    do
    :: atomic {
           i = 0;
           do
           :: i < N && !(hogging[i] && (inbox[i] > 0 || nxt[i] > 0 || ring[i] > 0)) -> i++
           :: else -> break
           od };
        if
        :: i < N ->
            atomic { gq = gq + inbox[i]; inbox[i] = 0 };    /* M4 */
#ifndef MUT_M5
            wakep_body(ok);                                    /* M5 */
#endif
            ok = 0
        :: else -> skip
        fi;
        i = 0;
        if
        :: nparked == N ->
            mon_idle = 1;                                     /* M1 */
#ifndef MUT_M2
            if
            :: nparked == N ->
end_m3:         (mon_idle == 0)                               /* M2, M3 */
            :: else -> mon_idle = 0
            fi
#else
end_m3b:    (mon_idle == 0)
#endif
        :: else ->
end_period:
            if
            :: timeout
            :: atomic { early > 0 -> early-- }
            fi
        fi
    od
}

/* An outside thread spawns one fiber: the global queue, then wakep. */
proctype outside()
{
    byte c, w;
    bool ok;
    gq++;
    wakep_body(ok)
}

/* Nothing can move: then no CPU may be parked beside work it could run or
 * steal (a lost wake-up), and the monitor may not sleep while a CPU is not
 * parked (at such a state that CPU runs a hog, whose inbox only the monitor
 * serves). With the monitor, such states recur (its looks follow them), so
 * each one is checked. */
#if NHOG > 0 && !defined(NO_MONITOR)
#define MONITOR 1
#endif
proctype lost()
{
    byte i, c;
    bool r;
#ifdef MONITOR
end_lost:
    do
    :: timeout ->
#else
end_lost:
       timeout ->
#endif
    atomic {
        i = 0;
        do
        :: i < N ->
            if
            :: state[i] == PARKED -> work_visible(i, r); assert(!r)
            :: else -> skip
            fi;
            i++
        :: else -> break
        od;
        i = 0;
        r = 0;
        assert(!mon_idle || nparked == N)
    }
#ifdef MONITOR
    od
#endif
}

init
{
    byte i;
    atomic {
        i = 0;
        do
        :: i < N -> run worker(i); i++
        :: else -> break
        od;
        run drainer();
#ifdef MONITOR
        run monitor();
#endif
#ifndef NO_OUTSIDE
        run outside();
#else
        gq = 1;
#endif
        run lost()
    }
}
