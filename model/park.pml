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
 * per period and sleeps while every worker is parked. Without NAMED the
 * fibers are counts. SPAWNS_ONLY leaves the fibers only their spawns and,
 * with IO or TIMERS, their waits.
 *
 * IO adds the I/O poller (io_poller=percpu; IO_SHARED: one set and its
 * poller role): fibers that wait on descriptors, a kernel that makes them
 * ready, CPUs that park in their set (PARKED_POLL), polls, and the break
 * of a blocked poll. TIMERS adds fibers that sleep on their CPU's timers,
 * and the park's deadline. NAMED gives each fiber a number and a place, so
 * that a fiber run twice or queued twice is caught; BOUND binds one fiber
 * to CPU 0; C4 lets the monitor serve a contended CPU awake between fibers.
 * CHEAP lets a thief leave a victim's queues alone (the cheap-victim rule).
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
#define PARKED_POLL 2           /* blocked in its epoll set (the I/O poller) */
#define ISPARKED(c) (state[c] != RUNNING)

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

#ifdef NAMED
/* Named fibers: fiber f (0 .. NFIB - 1: the first fiber, then one per
 * hand-off, in the order they are made) has one place, where[f]; the
 * counts above stay the queues, and each take and put moves the fiber it
 * takes or puts. A take runs the fiber it found there; run() asserts that
 * the fiber is queued (not running on another worker, not finished or
 * blocked: a fiber runs on one worker at once, once per time it is queued),
 * a put that the fiber is nowhere yet (not queued twice), and the check at
 * rest that each count equals the fibers placed there. Without BOUND a
 * fiber in the next slot of a CPU running a fiber is taken by a thief
 * whether it is a spawn or not, as usched__steal does. */
#if defined(IO) || defined(TIMERS) || defined(STOP)
#error "NAMED is for the configurations without the I/O poller, timers and shutdown"
#endif
#define NFIB (NF + 1)
#define NOF 255
#define W_NONE 0                /* not made yet, blocked for ever, or finished */
#define W_GQ 1
#define W_RUN(c) (2 + (c))
#define W_INB(c) (5 + (c))
#define W_NXT(c) (8 + (c))
#define W_SBN(c) (11 + (c))      /* the next slot, in its owner's store buffer */
#define W_RING(c) (14 + (c))
#define W_SBR(c) (17 + (c))
#define W_BL(c) (20 + (c))       /* the bound list (BOUND) */
#define W_HELD 23               /* taken by a thief or the monitor, on its way home (BOUND) */
byte where[NFIB];
byte run_f[N];                  /* the fiber CPU c runs, plus one (0: none) */
byte nborn;                     /* fibers made */
hidden byte hi, ff, fn;         /* scratch of the d_steps below */
#ifndef BOUNDF
#define BOUNDF NF               /* the bound fiber */
#endif
#ifdef BOUND
/* A bound fiber (usched_spawn_on): fiber BOUNDF (the last hand-off's) is
 * bound to CPU 0; it goes only to CPU 0's inbox, next slot (a sync hand-off there)
 * or bound list, which no thief sees (place.c, decide; queue.h). */
#define BOUNDTO(f) ((f) == BOUNDF -> 0 : NOB)
#define NOB 255
byte bl[N];                     /* the bound list (w->bound_head: owner only) */
#else
#define BOUNDTO(f) NOB
#define NOB 255
#endif
#define SRC(x) fn = (x)
#else
#define SRC(x) skip
#endif
#if defined(BOUND) && !defined(NAMED)
#error "BOUND needs NAMED"
#endif
#ifdef NAMED
#define NEWF ; hf = nborn; nborn++
#define NBORN1 nborn = 1
#define HF hf
#define NPUT(f, to) ; put(f, to)
#define NHF0 ; hf = 0
/* the fiber finishes or blocks (a hog's never does) */
#define NDONE(me) ; where[run_f[me] - 1] = W_NONE; run_f[me] = 0
#else
#define NEWF
#define NBORN1 skip
#define HF 0
#define NPUT(f, to)
#define NHF0
#define NDONE(me)
#endif
#ifdef BOUND
#define UNB BOUNDTO(hf) == NOB ->
#else
#define UNB
#endif

#ifdef CONTEND
/* The contention verdict (monitor.c, C1-C4): the monitor judges a worker
 * contended, or no longer, from its run delay; here the verdict flips at
 * any moment, NCF times in a run (any timing of the monitor's looks). A
 * contended worker parks without spinning (C2), and wakep passes it over
 * while an uncontended CPU is parked (C3). */
#ifndef NCF
#define NCF 2                   /* flips of the verdict in a run */
#endif
bool contended[N];              /* w->contended */
byte cflips = NCF;
#define CONT(c) contended[c]
#else
#define CONT(c) 0
#endif

#ifdef PACK
/* Packing (monitor.c, K1-K5): a packed CPU takes no new work (a placement
 * that names it goes to an unpacked CPU, K2), wakep passes it over (K3),
 * and it neither steals nor takes from the global queue (K4): it runs its
 * own queues and parks. The monitor packs a CPU at any moment while no
 * CPU stalls and another stays unpacked, and unpacks it at any moment,
 * kicking it (NPF such changes in a run: any timing of its looks); a look
 * that sees a stall unpacks every CPU and kicks it (pack_look). */
#if defined(IO) || defined(TIMERS)
#error "PACK is for the configurations without the I/O poller and timers"
#endif
#ifndef NPF
#define NPF 2                   /* packings and unpackings in a run */
#endif
bool packed[N];                 /* w->packed */
byte pflips = NPF;
bool pk_seen, pquiet;           /* the monitor's liveness check (below) */
#define PK(c) packed[c]
/* What a packed CPU would take unpacked, as work_visible looks (K4). */
#if N == 2
#define PKSEES(i) (gq > 0 || STEAL(i, 0) || STEAL(i, 1))
#define PKSTUCK ((ISPARKED(0) && packed[0] && PKSEES(0)) || (ISPARKED(1) && packed[1] && PKSEES(1)))
#else
#define PKSEES(i) (gq > 0 || STEAL(i, 0) || STEAL(i, 1) || STEAL(i, 2))
#define PKSTUCK ((ISPARKED(0) && packed[0] && PKSEES(0)) || (ISPARKED(1) && packed[1] && PKSEES(1)) || \
                 (ISPARKED(2) && packed[2] && PKSEES(2)))
#endif

#else
#define PK(c) 0
#endif
#if N == 2
#define ANYHOG (hogging[0] || hogging[1])
#else
#define ANYHOG (hogging[0] || hogging[1] || hogging[2])
#endif

#ifdef STOP
/* Shutdown (api.c, usched_destroy): once no fiber is live, the destroying
 * thread stores `stopping` and wakes every worker (park.c,
 * usched__wk_kick_all); each worker returns from its idle path. */
bool stopping;
bool exited[N];                 /* the worker returned (usched__worker_main ends) */
#endif

#ifdef TIMERS
/* Timers (timer.c): a fiber sleeps with a timer on its own CPU's heap (only
 * the running fiber adds one, sched.c usched__timer_add); the worker fires
 * the due ones at the top of each idle pass (steal.c usched__find_idle),
 * each waking its fiber through the policy; a park waits until the
 * earliest one [model: TMR]. */
#ifndef NT
#define NT 1                    /* sleeps the fibers may make in all */
#endif
byte tmr_budget = NT;
byte tmr[N];                    /* timers pending on the CPU's heap */
#ifdef MUT_TMR
#define DUE(me) 0
#else
#define DUE(me) (tmr[me] > 0)   /* the earliest timer's deadline (any time here) */
#endif
#else
#define DUE(me) 0
#endif

#ifdef IO
/* The I/O poller (src/io/poller.c, fd.c). io_poller=percpu (the default):
 * set c is CPU c's; IO_SHARED: one set, set 0, and a poller role. */
#ifdef IO_SHARED
#define SET(c) 0
#define NONE 255
byte poller = NONE;             /* the role holder of set 0 (st->poller) */
bool polled[N];                 /* a poll of the set since CPU c's deferral began */
#define ROLE_FREE (poller == NONE)
#else
#define SET(c) (c)
#define ROLE_FREE 1
#endif
#ifndef NIO
#define NIO 2                   /* descriptor waits the fibers may make in all */
#endif
byte io_budget = NIO;
byte nwait[N];                  /* st->nwaiters: read at P1' and P3'' */
byte fdw[N];                    /* fibers blocked on a descriptor of the set, not ready */
byte rdy[N];                    /* ready events queued in the set, not yet taken by a poll */
bool evfd[N];                   /* the set's eventfd has a count */
bool wake_sig[N];               /* st->wake_sig (B1, B3) */
#endif

#if defined(IO) || defined(TIMERS)
/* The monitor (with the poller or timers): a look saw the CPU stalled
 * (its first look of the stall is done), and, at a look after a state at
 * rest, a ready event in set c or a pending timer on CPU c. (Declared
 * for the monitor's text; they stay 0 where it does not run.) */
#if NHOG > 0 && !defined(NO_MONITOR)
#define MSTALE 1
#endif
bool stalled[N];
bool rdy_seen[N], tmr_seen[N], q_seen[N];
/* work on CPU c's queues that a thief takes */
#define QUEUED(c) (ring[c] > 0 || (nxt[c] > 0 && nxt_spawn[c]))
#ifndef TIMERS
byte tmr[N];                    /* (no timers: always 0) */
#endif
#ifndef IO
byte rdy[N], nwait[N];          /* (no poller: always 0) */
#define SET(c) (c)
#endif
#endif

/* ---- helpers ---------------------------------------------------------------- */

#ifdef CONTEND
#define SKP_VAR bool skp;       /* wakep passed over a contended parked CPU */
#else
#define SKP_VAR
#endif

/* Work CPU `me` could run or steal, as P3 and the spinner's chain test look
 * (sched.c, work_visible): its own queues (its own buffered puts included),
 * the global queue, other CPUs' rings, and a spawn in the next slot of a CPU
 * running a fiber. One atomic look: the model does not split its loads. */
#ifdef BOUND
#define OWN(me)  (inbox[me] + nxt[me] + sb_nxt[me] + ring[me] + sb_ring[me] + bl[me])
#else
#define OWN(me)  (inbox[me] + nxt[me] + sb_nxt[me] + ring[me] + sb_ring[me])
#endif
/* A thief takes the fiber in the next slot of a CPU running a fiber: a
 * spawn; with NAMED any fiber, as usched__steal's last pass does. */
#ifdef NAMED
#define NXT_STEALABLE(c) (nxt[c] > 0 && current[c])
#else
#define NXT_STEALABLE(c) (nxt[c] > 0 && nxt_spawn[c] && current[c])
#endif
#define STEAL(me, c) ((c) != (me) && (ring[c] > 0 || (nxt[c] > 0 && nxt_spawn[c] && current[c])))

#ifdef CHEAP
/* The cheap-victim rule (steal.c, V1-V4): a thief may leave (not take) the
 * ring and the next slot of a victim that runs a fiber whose queue keeps
 * moving. Its measures (V1) and pauses (V4) are time, which the model does
 * not have: any look at such a victim may leave it. A hog's queue stands
 * still, so V2 lets the steal go: a thief never leaves work behind a hog.
 * The choice is made outside try_all's d_step (SPIN resolves the choices
 * inside a d_step one way): try_all has a second d_step, executable only
 * when the thief would reach its steals and some victim could be left,
 * which sets `lv` (leave every victim that may be left). */
#define CHEAPV(c) (current[c] && !hogging[c])
#define LEAVABLE(me, c) ((c) != (me) && CHEAPV(c) && (ring[c] > 0 || NXT_STEALABLE(c)))
#if N == 2
#define LEAVE_ANY(me) (OWN(me) == 0 && gq == 0 && (LEAVABLE(me, 0) || LEAVABLE(me, 1)))
#else
#define LEAVE_ANY(me) (OWN(me) == 0 && gq == 0 && (LEAVABLE(me, 0) || LEAVABLE(me, 1) || LEAVABLE(me, 2)))
#endif
#define LEFT(c) (lv && CHEAPV(c))
hidden byte lv;                 /* this look leaves the victims it may (try_all) */
#else
#define LEFT(c) 0
#endif

#ifdef HOLD
#if !defined(IO) || defined(IO_SHARED) || !defined(MSTALE) || defined(CHEAP)
#error "HOLD needs IO (percpu) and the monitor with a hog, without CHEAP"
#endif
/* The busy-victim rule (steal.c, V6-V7): a thief with fibers waiting in
 * its own set (and contended: the monitor's verdict, any value here) may
 * leave the ring and the next slot of a victim running a fiber, at its
 * looks and at P3 alike, so it may park beside that work; its owner runs
 * it next, and a victim the monitor saw stalled (M5 woke a thief for it)
 * is never left [model: HLS]. The queue's bound is left out: any queue
 * may be left. As CHEAP does, the choice is made outside the d_steps. */
#ifndef MUT_HLS
#define HOLDV(c) (current[c] && !stalled[c])
#else
#define HOLDV(c) (current[c])
#endif
#define HOLDS(me, c) ((c) != (me) && HOLDV(c) && (ring[c] > 0 || NXT_STEALABLE(c)))
#if N == 2
#define HOLD_ANY(me) (nwait[me] > 0 && OWN(me) == 0 && gq == 0 && (HOLDS(me, 0) || HOLDS(me, 1)))
#else
#define HOLD_ANY(me) (nwait[me] > 0 && OWN(me) == 0 && gq == 0 && (HOLDS(me, 0) || HOLDS(me, 1) || HOLDS(me, 2)))
#endif
#define HELD(c) (hd && HOLDV(c))
hidden byte hd;                 /* this look leaves busy victims (try_all, VISIBLE) */
#else
#define HELD(c) 0
#endif

inline visible_look(me, r)
{
        r = (OWN(me) > 0 || (gq > 0 && !PK(me)));
        c = 0;
        do
        :: c < N -> r = r || (STEAL(me, c) && !PK(me) && !HELD(c)); c++
        :: else -> break
        od;
        c = 0
}

inline work_visible(me, r)
{
    d_step { visible_look(me, r) }
}

/* Work visible to `me` at P3 and at the chains' tests (SC, P3C): HOLD lets
 * a thief with waiters in its own set leave busy victims out. */
#ifdef HOLD
#define VISIBLE(me, r) \
    if \
    :: d_step { nwait[me] > 0 -> hd = 1; visible_look(me, r); hd = 0 } \
    :: work_visible(me, r) \
    fi
#else
#define VISIBLE(me, r) work_visible(me, r)
#endif

#ifdef MUT_CHV
#ifndef CHEAP
#error "MUT_CHV needs CHEAP"
#endif
/* The mutant CHV: the park's re-check applies the cheap-victim rule, so the
 * work a thief would leave (behind a victim running a fiber that is not a
 * hog) is not seen, and the thief may park beside it. The code's
 * usched__work_visible does not apply it (V3) [model: CHV]. */
inline work_visible_cheap(me, r)
{
    d_step {
        r = (OWN(me) > 0 || gq > 0);
        c = 0;
        do
        :: c < N -> r = r || (STEAL(me, c) && !CHEAPV(c)); c++
        :: else -> break
        od;
        c = 0
    }
}
#define P3LOOK(me, r) work_visible_cheap(me, r)
#else
#define P3LOOK(me, r) VISIBLE(me, r)
#endif

#ifdef MSTALE
/* The same, leaving out what is queued behind a stalled CPU (a hog). */
inline work_visible_rest(me, r)
{
    d_step {
        r = (OWN(me) > 0 || (gq > 0 && !PK(me)));
        c = 0;
        do
        :: c < N -> r = r || (STEAL(me, c) && !hogging[c] && !PK(me)); c++
        :: else -> break
        od;
        c = 0
    }
}
#endif

#ifdef NAMED
/* The first fiber placed at `from` (its number in ff): the count said one
 * is there. */
inline find_at(from)
{
    hi = 0; ff = NOF;
    do
    :: hi < NFIB && where[hi] == from -> ff = hi; break
    :: hi < NFIB && where[hi] != from -> hi++
    :: else -> break
    od;
    hi = 0;
    assert(ff != NOF)
}

/* Every fiber at `from` moves to `to`. */
inline move_all(from, to)
{
    hi = 0;
    do
    :: hi < NFIB -> if :: where[hi] == from -> where[hi] = to :: else -> skip fi; hi++
    :: else -> break
    od;
    hi = 0
}

/* Worker `me` starts to run fiber f: f was queued (not running on another
 * worker, not blocked, not finished), and a bound fiber runs on its CPU. */
inline run_fiber(me, f)
{
    assert(where[f] != W_NONE && where[f] != W_HELD);
    hi = 0;
    do
    :: hi < N -> assert(hi == me || run_f[hi] != f + 1); hi++
    :: else -> break
    od;
    hi = 0;
    assert(BOUNDTO(f) == NOB || BOUNDTO(f) == me);
    where[f] = W_RUN(me);
    run_f[me] = f + 1
}

/* The fibers placed at `loc` are n. */
inline count_is(loc, n)
{
    hi = 0; fn = 0;
    do
    :: hi < NFIB -> if :: where[hi] == loc -> fn++ :: else -> skip fi; hi++
    :: else -> break
    od;
    assert(fn == n);
    hi = 0; fn = 0
}

/* Fiber f is queued at `to`: it was not queued anywhere. */
inline put(f, to)
{
    assert(where[f] == W_NONE || where[f] == W_HELD);
    where[f] = to
}
#define FLUSH_NAMED(me) ; move_all(W_SBN(me), W_NXT(me)); move_all(W_SBR(me), W_RING(me))
#else
#define FLUSH_NAMED(me)
#endif

/* The store buffer of CPU `me` empties (a full fence, or a locked
 * instruction, by the owner). */
inline flush(me)
{
    d_step { nxt[me] = nxt[me] + sb_nxt[me]; sb_nxt[me] = 0;
             ring[me] = ring[me] + sb_ring[me]; sb_ring[me] = 0 FLUSH_NAMED(me) }
}

/* One fiber for CPU `me`: find_local (inbox, next slot, ring), the global
 * queue, then a steal (ring, or a spawn in a running CPU's next slot). One
 * atomic step: each take is a CAS or an exchange in the code, and the order
 * of the looks does not matter to the protocol (docs/model.md). */
#ifdef CHEAP
#define try_all(me, got) \
    if \
    :: d_step { LEAVE_ANY(me) -> lv = 1; try_look(me, got); lv = 0 } \
    :: d_step { try_look(me, got) } \
    fi
#elif defined(HOLD)
#define try_all(me, got) \
    if \
    :: d_step { HOLD_ANY(me) -> hd = 1; try_look(me, got); hd = 0 } \
    :: d_step { try_look(me, got) } \
    fi
#else
#define try_all(me, got) d_step { try_look(me, got) }
#endif

inline try_look(me, got)
{
        got = 1;
        if
        :: inbox[me] > 0 -> inbox[me]--; SRC(W_INB(me))
        :: else -> if
            :: sb_nxt[me] > 0 -> sb_nxt[me]--; SRC(W_SBN(me))
            :: else -> if
                :: nxt[me] > 0 -> nxt[me]--; SRC(W_NXT(me))
                :: else ->
#ifdef BOUND
                /* the bound list (local.h: after the next slot) */
                if
                :: bl[me] > 0 -> bl[me]--; SRC(W_BL(me))
                :: else ->
#endif
                if
                    :: sb_ring[me] > 0 -> sb_ring[me]--; SRC(W_SBR(me))
                    :: else -> if
                        :: ring[me] > 0 -> ring[me]--; SRC(W_RING(me))
                        :: else -> if
                            :: gq > 0 && !PK(me) -> gq--; SRC(W_GQ)
                            :: else ->
                                got = 0;
                                c = 0;
                                do
                                :: c < N && !got && !PK(me) ->
                                    if
                                    :: c != me && !LEFT(c) && !HELD(c) && ring[c] > 0 -> ring[c]--; got = 1; SRC(W_RING(c))
                                    :: c != me && !LEFT(c) && !HELD(c) && ring[c] == 0 && NXT_STEALABLE(c) ->
#ifdef MUT_NXC
                                        /* the thief loads the slot; its store of
                                         * NULL comes in a later step (take) */
                                        find_at(W_NXT(c)); nxf = ff + 1; nxl = c + 1; got = 1
#else
                                        /* the CAS of the slot (usched__wk_next_steal)
                                         * [model: NXC] */
                                        nxt[c]--; got = 1; SRC(W_NXT(c))
#endif
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
#ifdef BOUND
                fi
#endif
            fi
        fi;
#ifdef NAMED
        if
        :: got && nxl == 0 ->
            find_at(fn);
            if
#if defined(BOUND) && !defined(MUT_BST)
            /* a thief that took a bound fiber from a next slot sends it
             * home (take_one, below) [model: BST] */
            :: BOUNDTO(ff) != NOB && fn >= W_NXT(0) && fn < W_NXT(N) && fn != W_NXT(me) ->
                where[ff] = W_HELD; hb = ff + 1; got = 0
#endif
            :: else -> run_fiber(me, ff)
            fi
        :: got && nxl > 0 -> got = 0
        :: else -> skip
        fi;
        ff = 0; fn = 0
#endif
}

/* try_all, then what follows a take in the code: a bound fiber taken from
 * another CPU's next slot goes home, by its CPU's inbox (W1-W3: its CPU may
 * have parked since) (steal.c, usched__steal). */
inline take_one(me, got)
{
    try_all(me, got)
#ifdef BOUND
    ;
    if
    :: hb > 0 ->
        d_step { inbox[BOUNDTO(hb - 1)]++; put(hb - 1, W_INB(BOUNDTO(hb - 1))) };
        kick(BOUNDTO(hb - 1), ok);
        hb = 0; ok = 0
    :: else -> skip
    fi
#endif
#ifdef MUT_NXC
    ;
    /* the thief's plain store of NULL into the slot, then it runs the
     * fiber it loaded */
    if
    :: nxl > 0 -> d_step { nxt[nxl - 1] = 0; run_fiber(me, nxf - 1); nxl = 0; nxf = 0; got = 1 }
    :: else -> skip
    fi
#endif
}

/* Leaving PARKED, by the CPU itself or a waker (sched.c unpark and
 * usched__wk_wake_parked): the CAS and nparked--, then W-M: wake the
 * monitor if it sleeps [model: WM]. */
inline leave_parked(cpu, ok)
{
    atomic {
        if
        :: ISPARKED(cpu) ->
#ifdef IO
            was = state[cpu];
#endif
            state[cpu] = RUNNING; nparked--; ok = 1
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

/* usched__wk_wake_parked: a waker moves `cpu` out of its parked state and,
 * when it was PARKED_POLL, breaks the blocked poll (W3', poller.c io_break)
 * [model: W3B]: B1, CAS wake_sig 0 -> 1 (the loser does nothing more: a
 * write is outstanding); B2, the winner writes the eventfd. */
inline wake_parked(cpu, ok)
{
    leave_parked(cpu, ok);
#ifdef IO
#ifndef MUT_W3B
    if
    :: ok && was == PARKED_POLL ->
        if
        :: atomic { !wake_sig[SET(cpu)] -> wake_sig[SET(cpu)] = 1 };   /* B1 */
           evfd[SET(cpu)] = 1                                          /* B2 */
        :: else -> skip
        fi
    :: else -> skip
    fi;
#endif
    was = 0
#endif
}

/* W3: wake `cpu` if it is parked (queue.h, usched__wk_kick) [model: W3]. */
inline kick(cpu, ok)
{
#ifndef MUT_W3
    if
    :: ISPARKED(cpu) -> wake_parked(cpu, ok)
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
                               :: ISPARKED(w) && !CONT(w) && !PK(w) -> wake_parked(w, ok)
#ifdef CONTEND
                               :: ISPARKED(w) && CONT(w) && !PK(w) -> skp = 1
#endif
                               :: else -> skip
                               fi;
                               w++
            :: else -> break
            od;
            w = 0;
#ifdef CONTEND
            /* C3: contended CPUs last, when no uncontended CPU was parked
             * [model: C3] (the mutant also leaves them out of the second
             * look below, which would otherwise wake them instead) */
#ifndef MUT_C3
            if
            :: !ok && skp ->
                do
                :: w < N && !ok -> if
                                   :: ISPARKED(w) && !PK(w) -> wake_parked(w, ok)
                                   :: else -> skip
                                   fi;
                                   w++
                :: else -> break
                od;
                w = 0
            :: else -> skip
            fi;
#endif
            skp = 0;
#endif
            if
            :: !ok ->
                waking = 0;
                /* WP3: a CPU may have parked after the scan while another
                 * waker, seeing `waking`, left the wake-up to this one:
                 * look once more [model: WP3] */
#ifndef MUT_WP3
                do
                :: w < N && !ok -> if
#ifdef MUT_C3
                                   :: ISPARKED(w) && !CONT(w) && !PK(w) -> wake_parked(w, ok)
#else
                                   :: ISPARKED(w) && !PK(w) -> wake_parked(w, ok)
#endif
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

#if defined(IO) || defined(TIMERS)
#ifdef IO
/* A poll takes the ready events of set `st` (edge-triggered: each once);
 * the fibers they wake leave the set's count at once (fd.c: when they run
 * again, after usched__wq_wait; docs/model.md). */
inline take(st)
{
    nev = rdy[st]; rdy[st] = 0; nwait[st] = nwait[st] - nev;
    rdy_seen[st] = 0;
#ifdef IO_SHARED
    polled[0] = 1; polled[1] = 1;
#if N == 3
    polled[2] = 1;
#endif
#endif
    skip
}
#endif

/* The fibers of the events a poll took (io: 1), or of the timers that fired
 * (io: 0), woken through the policy (fd.c usched__pd_ready, usched__wake
 * with USCHED_SEL_IO), each to any CPU (its previous one): another CPU's
 * inbox (W1-W3), or this CPU's next slot (a wake-up, not a spawn) or ring,
 * then wakep (place.c, place_local) - except [model: IOW] an I/O wake-up
 * that is the only work of a CPU running no fiber: that CPU runs it next
 * (its look at its own queues, or P3, finds it). */
inline dispatch(me, io)
{
    do
    :: nev > 0 ->
        select(t : 0 .. N - 1);
        if
        :: t != me -> handoff = 1; atomic { inbox[t]++; nev-- }; kick(t, ok)
        :: else ->
            nxt_spawn[me] = 0;
            atomic {
                iow = (io && !current[me] && nxt[me] + sb_nxt[me] + ring[me] + sb_ring[me] == 0);
                if
                :: nxt[me] + sb_nxt[me] == 0 -> sb_nxt[me]++
                :: else -> sb_ring[me]++
                fi;
                nev--
            };
            if
            :: iow -> iow = 0
            :: else -> wakep(me, ok)
            fi
        fi;
        t = 0; ok = 0
    :: else -> break
    od
}
#endif

#ifdef IO

/* An idle CPU's non-blocking poll (poller.c io_poll_idle), while it spins:
 * its own set (whoever holds the role), then, io_poller=percpu and its own
 * set empty, a set whose owner is not blocked in it (left unpolled by a
 * busy owner: IO_STEAL_AFTER_NS, any time here). */
/* The same without its own set (percpu): a contended CPU about to park
 * (C2), which blocks in its own set next while fibers wait on it. */
inline poll_others(me)
{
    d_step {
        nev = 0;
#ifdef IO_SHARED
        if
        :: nwait[SET(me)] > 0 -> take(SET(me))
        :: else -> skip
        fi;
#else
        c = 0;
        do
        :: c < N && nev == 0 ->
            if
            :: c != me && nwait[c] > 0 && state[c] != PARKED_POLL -> take(c)
            :: else -> skip
            fi;
            c++
        :: else -> break
        od;
        c = 0
#endif
    };
    dispatch(me, 1)
}

inline poll_idle(me)
{
    d_step {
        nev = 0;
        if
        :: nwait[SET(me)] > 0 -> take(SET(me))
        :: else -> skip
        fi;
#ifndef IO_SHARED
        c = 0;
        do
        :: c < N && nev == 0 ->
            if
            :: c != me && nwait[c] > 0 && state[c] != PARKED_POLL -> take(c)
            :: else -> skip
            fi;
            c++
        :: else -> break
        od;
        c = 0
#endif
    };
    dispatch(me, 1)
}
#endif

/* A hand-off's fiber f into the next slot of `me` (queue.h,
 * usched__wk_local_put): the fiber there moves to the ring or, bound, to
 * the bound list, which no thief sees [model: BRG]. Plain stores: the
 * owner's store buffer. */
#ifdef NAMED
inline slot_put(me, f)
{
    d_step {
        if
        :: nxt[me] + sb_nxt[me] == 0 -> sb_nxt[me]++; put(f, W_SBN(me))
        :: else ->
            if
            :: sb_nxt[me] > 0 -> find_at(W_SBN(me))
            :: else -> find_at(W_NXT(me))
            fi;
            put(f, where[ff]);
            if
#if defined(BOUND) && !defined(MUT_BRG)
            :: BOUNDTO(ff) != NOB -> bl[me]++; where[ff] = W_BL(me)
#endif
            :: else -> sb_ring[me]++; where[ff] = W_SBR(me)
            fi;
            ff = 0
        fi
    }
}
#else
inline slot_put(me, f)
{
    if
    :: nxt[me] + sb_nxt[me] == 0 -> sb_nxt[me]++
    :: else -> sb_ring[me]++
    fi
}
#endif

/* ---- a worker ------------------------------------------------------------------ */

/* The woken worker clears `waking` (and the model its record of the state
 * it left) */
#ifdef IO
#define WAKING0 atomic { waking = 0; was = 0 }
#else
#define WAKING0 waking = 0
#endif

#ifdef PACK
/* K2: a placement that names a packed CPU goes to an unpacked one (the
 * CPU may be packed after this look: then the fiber is its own work). */
inline STANDIN(t)
{
    atomic {
        if
        :: packed[t] ->
            t = 0;
            do
            :: t < N - 1 && packed[t] -> t++
            :: else -> break
            od
        :: else -> skip
        fi
    }
}
#else
#define STANDIN(t) skip
#endif

/* Takes one fiber and, if it got one, chains a wakep for work left beside
 * it [model: P3C] and runs it: after P3 found work, and when a woken worker
 * finds its own queues non-empty (steal.c, usched__find_idle) [model: WKL],
 * where a second pass would park again only for P3 to find it. The take is
 * take_one's, whose own queues come first; a thief may empty them between
 * the look and the take, and the worker then takes what try_all finds, or
 * goes on as before. Used inside worker only (its label exec). */
inline take_chain(me)
{
    take_one(me, got);
    if
    :: got ->
        VISIBLE(me, vis);
#ifndef MUT_P3C
        if :: vis -> wakep(me, ok) :: else -> skip fi;
#endif
        goto exec
    :: else -> skip
    fi
}

inline woke_local(me)
{
    if
    :: OWN(me) > 0 -> take_chain(me)
    :: else -> skip
    fi
}

proctype worker(byte me)
{
    bool got, ok, vis, spinning, handoff, spawn_woke, nospin;
    byte c, w, old, t, was;
#ifdef NAMED
    byte hf, hb, nxl, nxf;      /* the hand-off's fiber; BST, NXC's fiber */
#endif
    SKP_VAR
#if defined(IO) || defined(TIMERS)
    byte nev;
    bool iow;                   /* IOW: this I/O wake-up wakes no other CPU */
#endif
#ifdef IO
    bool inpoll, evw, dfr, dns, renew;
#endif

top:
    take_one(me, got);
    if
    :: got -> goto exec
    :: else -> skip
    fi;
    do
    :: atomic { got = 0; vis = 0; ok = 0 };
#ifdef TIMERS
        /* the due timers (time passes: due or not yet) */
        if
        :: atomic { tmr[me] > 0 -> tmr[me]--; nev = 1 }; dispatch(me, 0)
        :: skip
        fi;
#endif
       /* spin, if fewer than half of the awake CPUs spin, or after a hand-off */
        atomic {
#ifdef IO_SHARED
            /* after a deferral that ran out: straight to the park checks */
            if
            :: renew -> goto decided
            :: else -> skip
            fi;
#endif
            if
            :: CONT(me) -> nospin = 1   /* C2: a contended CPU parks without spinning */
            :: else -> if
                :: 2 * nspinning < N - nparked || handoff -> nspinning++; spinning = 1
                :: else -> skip
                fi
            fi;
            handoff = 0;
decided:    skip
        };
#if defined(IO) && defined(CONTEND)
        /* C2: not spinning, a contended CPU still makes the non-blocking
         * poll of a spinner's first pass [model: CP] (its park claims only
         * its own set; steal.c) */
        if
#ifndef MUT_CP
        :: nospin -> poll_others(me)
#endif
        :: else -> skip
        fi;
#endif
        nospin = 0;
        if
        :: spinning ->
#ifdef IO
            /* the spin's first pass polls before it looks (steal.c) */
            poll_idle(me);
#endif
            do
            :: take_one(me, got);
               if
               :: got ->
                   atomic { old = nspinning; nspinning-- };
                   spinning = 0;
                   /* the last spinner to find work wakes another [model: SC] */
                   if
                   :: old == 1 ->
                       VISIBLE(me, vis);
#ifndef MUT_SC
                       if :: vis -> wakep(me, ok) :: else -> skip fi
#endif
                   :: else -> skip
                   fi;
                   old = 0;
                   goto exec
               :: else -> skip
               fi
#ifdef IO
            :: poll_idle(me)
#endif
            :: break   /* the spin ran out */
            od;
            nspinning--;
            spinning = 0
        :: else -> skip
        fi;
#ifdef STOP
        /* the scheduler stops: return instead of parking (steal.c) */
        if :: stopping -> goto stop :: else -> skip fi;
#endif
        /* P1: nparked first, then the state [model: P1] */
        nparked++;
#ifdef IO
        /* P1': the poller role (poller.c io_claim), one step here: while
         * fibers wait on the set, percpu: the CPU's own set's role, always;
         * IO_SHARED: deferred while another CPU spins, or renewed after a
         * deferral that ran out while another CPU is awake and the set was
         * polled since; else the CAS of the role. */
        atomic {
            inpoll = 0; dfr = 0;
            if
            :: nwait[SET(me)] > 0 ->
#ifdef IO_SHARED
                if
                :: poller == NONE ->
                    if
                    :: renew && dns && N > nparked && polled[me] -> dfr = 1
                    :: else -> if :: nspinning > 0 -> dfr = 1 :: else -> skip fi
                    fi
                :: else -> skip
                fi;
                if
                :: dfr -> dns = 1; polled[me] = 0
                :: else ->
                    dns = 0;
                    /* the CAS of the role: taken only when free [model: ROLE]
                     * (the mutant stores it over another CPU's, as a load
                     * and a store would when both CPUs saw it free) */
#ifndef MUT_ROLE
                    if :: poller == NONE -> poller = me; inpoll = 1 :: else -> skip fi
#else
                    poller = me; inpoll = 1
#endif
                fi
#else
                inpoll = 1
#endif
            :: else -> skip
            fi;
            renew = 0
        };
#define PSTATE (inpoll -> PARKED_POLL : PARKED)
#else
#define PSTATE PARKED
#endif
#ifndef MUT_P2
        state[me] = PSTATE;
        /* P2: full fence [model: P2] */
        flush(me);
        /* P3: re-check [model: P3] (CHV: it does not apply the
         * cheap-victim rule) */
        P3LOOK(me, vis);
#else
        /* without P2's fence the seq_cst store may pass P3's loads */
        work_visible(me, vis);
        state[me] = PSTATE;
#endif
#ifdef MUT_P3
        vis = 0;
#endif
#ifdef PACK
        /* K4: packed, it parks beside the work of others (P3 left it out)
         * but wakes an unpacked CPU for it [model: PKW]: a waker may have
         * left the wake-up to it as a spinner (it was packed mid-spin) */
#ifndef MUT_PKW
        if
        :: !vis && PK(me) && PKSEES(me) -> wakep(me, ok); ok = 0
        :: else -> skip
        fi;
#endif
#endif
#if defined(STOP) && !defined(MUT_STP)
        /* P3 counts the scheduler stopping as work seen: a worker that
         * stored PARKED after the destroyer's store of RUNNING would
         * otherwise sleep for ever [model: STP] */
        vis = vis || stopping;
#endif
#if defined(IO) && !defined(IO_SHARED) && !defined(MUT_P3N)
        /* P3'' (percpu): parking on the futex, a waiter in its own set
         * added since P1' counts as work seen [model: P3N] */
        vis = vis || (!inpoll && nwait[me] > 0);
#endif
        if
        :: vis ->
#ifdef IO_SHARED
            /* P3 found work: give the role back (io_unclaim) [model: UNC] */
#ifndef MUT_UNC
            if :: inpoll -> poller = NONE :: else -> skip fi;
#endif
            inpoll = 0; dfr = 0;
#endif
            leave_parked(me, ok);
            WAKING0;
            ok = 0;
            /* work left after the re-check found some: chain (P3C) */
            take_chain(me)
        :: else ->
#ifdef IO
            if
            :: inpoll ->
                /* P4': epoll_wait, until the eventfd has a count or an
                 * event is ready; the events are taken here */
end_poll:       atomic { (evfd[SET(me)] || rdy[SET(me)] > 0 || DUE(me)) ->
#ifdef IO_SHARED
                         /* (c) the CPU blocked in the set holds its role */
                         assert(poller == me);
#endif
                         evw = evfd[SET(me)]; take(SET(me)) };
#ifdef MUT_B3
#ifdef IO_SHARED
                poller = NONE;
#endif
#endif
                /* B3: the role holder reads the eventfd, then clears
                 * wake_sig, both before it gives the role up [model: B3] */
                if
                :: evw -> evfd[SET(me)] = 0; wake_sig[SET(me)] = 0; evw = 0
                :: else -> skip
                fi;
#if defined(IO_SHARED) && !defined(MUT_B3)
                poller = NONE;
#endif
                leave_parked(me, ok);
                WAKING0;
                ok = 0;
                inpoll = 0;
                /* the events go out after unpark */
                dispatch(me, 1);
                woke_local(me)
            :: else ->
                /* P4: futex_wait(state, PARKED), until a deferral's end
                 * (IO_SHARED: at any time here) */
#ifdef IO_SHARED
end_park:       (state[me] != PARKED || dfr || DUE(me));
#else
end_park:       (state[me] != PARKED || DUE(me));
#endif
#ifdef IO_SHARED
                renew = dfr && state[me] == PARKED;
                dfr = 0;
#endif
                leave_parked(me, ok);
                WAKING0;
                ok = 0;
                woke_local(me)
            fi
#else
            /* P4: futex_wait(state, PARKED), until the earliest timer */
end_park:   (state[me] != PARKED || DUE(me));
            leave_parked(me, ok);
            waking = 0;
            ok = 0;
            woke_local(me)
#endif
        fi
    od;

exec:
#ifdef STOP
    /* no fiber starts once the scheduler stops: the destroyer waited
     * until none was live (fiber.c, usched__wait_live) */
    assert(!stopping);
#endif
    atomic { got = 0; vis = 0; ok = 0; current[me] = 1 };
    spawn_woke = 0;
    do
    :: atomic { budget > 0 -> budget-- NEWF };
        if
#ifdef BOUND
        :: /* a bound fiber (place.c, decide): only its CPU's queues, by
            * its inbox (W1-W3) from another CPU; on its CPU, a sync
            * hand-off into the next slot (then the waker blocks), else
            * the bound list */
            BOUNDTO(hf) != NOB ->
            if
            :: BOUNDTO(hf) != me ->
                handoff = 1;
                d_step { inbox[BOUNDTO(hf)]++; put(hf, W_INB(BOUNDTO(hf))) };
                kick(BOUNDTO(hf), ok)
            :: BOUNDTO(hf) == me -> d_step { bl[me]++; put(hf, W_BL(me)) }
            :: BOUNDTO(hf) == me ->
                nxt_spawn[me] = 0;
                slot_put(me, HF);
                wakep(me, ok);
                hf = 0;
                break
            fi
#endif
        :: /* a spawn into the next slot (the one there moves to the ring):
            * plain stores, then wakep unless a burst (place.c) */
            UNB nxt_spawn[me] = 1;
            slot_put(me, HF);
            if
            :: !spawn_woke || ring[me] + sb_ring[me] <= 1 -> spawn_woke = 1; wakep(me, ok)
            :: else -> skip
            fi
#ifndef SPAWNS_ONLY
        :: /* W1-W3: a wake-up into another CPU's inbox [model: W2]:
            * the push is a seq_cst exchange, so W3's load follows it */
            UNB select(t : 0 .. N - 1);
            STANDIN(t);
            if
            :: t != me ->
                handoff = 1;
#ifndef MUT_W2
                d_step { inbox[t]++ NPUT(hf, W_INB(t)) };
                kick(t, ok)
#else
                kick(t, ok);
                d_step { inbox[t]++ NPUT(hf, W_INB(t)) }
#endif
            :: else ->
                /* a sync hand-off on this CPU: the next slot (not a spawn,
                 * so not stealable there), wakep, and the waker blocks */
                nxt_spawn[me] = 0;
                slot_put(me, HF);
                wakep(me, ok);
                t = 0 NHF0;
                break
            fi;
            t = 0
        :: /* the shared run queue; the policy names a CPU to kick: one
            * that runs no fiber when it decides (global.c: the first idle
            * CPU), else this CPU; when that is this CPU, wakep [model: GQW] */
            UNB atomic {
                t = 0;
                do
                :: t < N && (t == me || !current[t]) -> break
                :: t < N -> t++
                :: else -> t = me; break
                od
            };
            STANDIN(t);
            d_step { gq++ NPUT(hf, W_GQ) };
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
        ok = 0 NHF0
#ifdef IO
    :: /* a wait on a descriptor of set t (fd.c usched__pd_wait), which
        * becomes ready some time (fdw) or never (a silent peer): the
        * waiter, then nwaiters++, a seq_cst read-modify-write, before the
        * load of the home's state [model: FD2]; percpu, a home that is not
        * this CPU: kick it if it is PARKED, to block in its set
        * [model: FDK]; then the fiber blocks */
        atomic { io_budget > 0 -> io_budget--;
#ifdef IO_SHARED
                 t = 0
#else
                 select(t : 0 .. N - 1)
#endif
        };
#ifdef MUT_FD2
        if :: t != me && state[t] == PARKED -> kick(t, ok) :: else -> skip fi;
        atomic { nwait[t]++; if :: fdw[t]++ :: skip fi };
#else
        atomic { nwait[t]++; if :: fdw[t]++ :: skip fi };
#if !defined(IO_SHARED) && !defined(MUT_FDK)
        if :: t != me && state[t] == PARKED -> kick(t, ok) :: else -> skip fi;
#endif
#endif
        t = 0; ok = 0;
        break
    :: /* a busy CPU's poll at a pick (io_tick): its own set, unless someone
        * holds the set's role */
        d_step { nwait[SET(me)] > 0 && rdy[SET(me)] > 0 && ROLE_FREE -> take(SET(me)) };
        dispatch(me, 1)
#endif
#ifdef TIMERS
    :: /* a sleep: a timer on this CPU's heap, and the fiber blocks */
        atomic { tmr_budget > 0 -> tmr_budget--; tmr[me]++ };
        break
#endif
    :: atomic { hogs_left > 0 -> hogs_left--; hogging[me] = 1 };
end_hog: false   /* computes for ever: only the monitor helps its queues */
    :: break
    od;
    atomic { current[me] = 0 NDONE(me) };
    goto top;
#ifdef STOP
stop:
    exited[me] = 1
#endif
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

#ifdef IO
/* The kernel: a descriptor a fiber waits on becomes ready, at any time (its
 * event queued in the set). */
proctype kernel()
{
end_kernel:
    do
    :: atomic { fdw[0] > 0 -> fdw[0]--; rdy[0]++ }
#ifndef IO_SHARED
    :: atomic { fdw[1] > 0 -> fdw[1]--; rdy[1]++ }
#if N == 3
    :: atomic { fdw[2] > 0 -> fdw[2]--; rdy[2]++ }
#endif
#endif
    od
}
#endif

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
#if defined(IO) || defined(TIMERS)
/* With the I/O poller or timers, a look also serves what only the stalled
 * CPU serves besides its queues: the look at the start of the stall, every
 * look while its set has waiters (percpu), its timers. */
#define MSERVE(i) (!stalled[i] || tmr[i] > 0 || nwait[SET(i)] > 0)
#else
#define MSERVE(i) 0
#endif
#ifdef C4
/* C4: a contended CPU awake between fibers (running none, not parked) is
 * served like a stalled one (monitor.c, check_cpu): its inbox, M4, while
 * the CPU itself may take it, look for work elsewhere, or park. */
#if !defined(CONTEND) || !defined(BOUND)
#error "C4 needs CONTEND and BOUND"
#endif
#define C4SERVE(i) (CONT(i) && !current[i] && !ISPARKED(i) && inbox[i] > 0)
#else
#define C4SERVE(i) 0
#endif

#ifdef NAMED
/* M4 with named fibers (monitor.c, move_queues): the inbox of CPU i to the
 * global queue, a bound fiber excepted: it goes back into its CPU's inbox,
 * with W1-W3 (the worker may have parked while the monitor held its
 * fibers: C4) [model: BMV]. */
#ifdef MUT_BMV
#define MBOUND(f) 0
#else
#define MBOUND(f) (BOUNDTO(f) != NOB)
#endif
inline move_inbox(i)
{
    d_step {
        hi = 0;
        do
        :: hi < NFIB ->
            if
            :: where[hi] == W_INB(i) && !MBOUND(hi) -> where[hi] = W_GQ; gq++
            :: where[hi] == W_INB(i) && MBOUND(hi) -> where[hi] = W_HELD; mb++
            :: else -> skip
            fi;
            hi++
        :: else -> break
        od;
        hi = 0;
        inbox[i] = 0
    };
    if
    :: mb > 0 ->
        d_step { inbox[i]++; put(BOUNDF, W_INB(i)); mb = 0 };
#ifndef MUT_BKH
        /* the kick of W1-W3 [model: BKH] */
        kick(i, ok);
#endif
        ok = 0
    :: else -> skip
    fi
}
#endif

proctype monitor()
{
    byte c, w, i, was;
    bool ok;
    SKP_VAR
    byte early = NEARLY;
#ifdef NAMED
    byte mb;                    /* bound fibers the monitor holds (BMV) */
#endif
#if defined(IO) || defined(TIMERS)
    bool wk, quiet;
    byte t, nev;
#endif
    do
    :: atomic {
#if defined(IO) || defined(TIMERS)
           /* A look that follows a state at rest (a whole period in the
            * code): nothing the stalled CPU alone serves may have waited
            * through the whole period before it, since the state at rest
            * before the last look: a ready event of a set, a timer, or
            * work queued behind the stalled CPU. Then what waits now. */
           i = 0;
           do
           :: i < N ->
               assert(!quiet || (!(rdy_seen[i] && rdy[i] > 0) && !(tmr_seen[i] && tmr[i] > 0) &&
                                 !(q_seen[i] && hogging[i] && QUEUED(i))));
               rdy_seen[i] = quiet && rdy[i] > 0; tmr_seen[i] = quiet && tmr[i] > 0;
               q_seen[i] = quiet && hogging[i] && QUEUED(i);
               i++
           :: else -> break
           od;
           quiet = 0;
#endif
#ifdef PACK
           /* A look that follows a state at rest: no CPU was packed and
            * parked beside work it would take unpacked (queued behind a
            * stalled CPU: at rest every awake CPU is one) through the
            * whole period before it, since the state at rest before the
            * last look. Then what is so now. */
           assert(!(pquiet && pk_seen && PKSTUCK));
           pk_seen = pquiet && PKSTUCK;
           pquiet = 0;
#endif
           i = 0;
           do
           :: i < N && !(hogging[i] && (inbox[i] > 0 || nxt[i] > 0 || ring[i] > 0 || MSERVE(i))) && !C4SERVE(i) -> i++
           :: else -> break
           od };
        if
        :: i < N ->
#if defined(IO) || defined(TIMERS)
            /* T1-T3: the stalled CPU's due timers, fired by the monitor,
             * each waking its fiber from outside the workers: any CPU's
             * inbox (W1-W3) [model: MT] */
#ifndef MUT_MT
            atomic { nev = tmr[i]; tmr[i] = 0 };
            do
            :: nev > 0 ->
                select(t : 0 .. N - 1);
                atomic { inbox[t]++; nev-- };
                kick(t, ok);
                t = 0; ok = 0
            :: else -> break
            od;
#endif
            atomic { wk = inbox[i] > 0 || nxt[i] > 0 || ring[i] > 0; gq = gq + inbox[i]; inbox[i] = 0 };    /* M4 */
#ifdef MUT_M5
            wk = 0;
#endif
#ifdef IO
            /* at the stall's first look while the poller exists, and on
             * every look while fibers wait in the stalled CPU's own set
             * (percpu: only an idle CPU's poll takes its readiness),
             * wake a parked CPU [model: MIO] */
            wk = wk || (!stalled[i] && io_budget < NIO);
#if !defined(IO_SHARED) && !defined(MUT_MIO)
            wk = wk || nwait[i] > 0;
#endif
            /* IO_SHARED: on every look while fibers wait in the one set
             * and no CPU holds its role, wake a parked CPU [model: MSH]:
             * the first look's wake-up may find a CPU between P1 and its
             * store of PARKED, which then sleeps on its futex (monsh) */
#if defined(IO_SHARED) && !defined(MUT_MSH)
            wk = wk || (nwait[0] > 0 && poller == NONE);
#endif
#endif
            stalled[i] = 1;
            if
            :: wk -> wakep_body(ok)                            /* M5 */
            :: else -> skip
            fi;
            wk = 0;
#else
#ifdef NAMED
            move_inbox(i);                                      /* M4 */
#else
            atomic { gq = gq + inbox[i]; inbox[i] = 0 };    /* M4 */
#endif
#ifndef MUT_M5
            wakep_body(ok);                                    /* M5 */
#endif
#endif
            ok = 0
        :: else -> skip
        fi;
        i = 0;
#ifdef PACK
        /* K1: a stall unpacks every CPU [model: PKS] and kicks it
         * [model: PKU] (pack_look): M5's wakep just passed it over */
#ifndef MUT_PKS
        if
        :: ANYHOG ->
            do
            :: i < N ->
                if
                :: packed[i] ->
                    packed[i] = 0;
#ifndef MUT_PKU
                    kick(i, ok);
#endif
                    ok = 0
                :: else -> skip
                fi;
                i++
            :: else -> break
            od;
            i = 0
        :: else -> skip
        fi;
#endif
#endif
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
#if defined(IO) || defined(TIMERS)
            :: timeout -> quiet = 1
#elif defined(PACK)
            :: timeout -> pquiet = 1
#else
            :: timeout
#endif
            :: atomic { early > 0 -> early-- }
            fi
        fi
    od
}

#ifdef STOP
/* No fiber is live (fiber.c, usched__wait_live): none queued, in a store
 * buffer, taken and about to run, running, among the events or timers a
 * CPU took and is about to wake, waiting on a descriptor or sleeping. */
#if defined(IO) || defined(TIMERS)
#define TAKEN(i) (worker[i + 1]:got || worker[i + 1]:nev > 0)
#else
#define TAKEN(i) (worker[i + 1]:got)
#endif
#ifdef IO
#define WAITS(i) (nwait[i] > 0)
#else
#define WAITS(i) 0
#endif
#ifdef TIMERS
#define SLEEPS(i) (tmr[i] > 0)
#else
#define SLEEPS(i) 0
#endif
#define BUSY(i) (OWN(i) > 0 || current[i] || TAKEN(i) || WAITS(i) || SLEEPS(i))
#if N == 2
#define LIVE (gq > 0 || BUSY(0) || BUSY(1))
#else
#define LIVE (gq > 0 || BUSY(0) || BUSY(1) || BUSY(2))
#endif

/* usched_destroy once no fiber is live: `stopping` (seq_cst), then
 * usched__wk_kick_all: every worker's state stored RUNNING and its futex
 * woken (the model's futex wait ends when the state is not PARKED), and
 * the I/O backend's wake of every set [model: KIO] (B1, B2 per set: a CPU
 * blocked in a set for waiters already gone, its events taken by a
 * spinner's poll, is woken only by that). The monitor is stopped first;
 * the configurations with STOP have none. */
inline destroy()
{
    /* (a fiber blocked for ever keeps it waiting: the deadlock that
     * usched__wait_live reports is not modelled) */
    skip;
end_destroy:
    (!LIVE);
    stopping = 1;
    c = 0;
    do
    :: c < N -> state[c] = RUNNING; c++
    :: else -> break
    od;
    c = 0;
#if defined(IO) && !defined(MUT_KIO)
    do
    :: c < N ->
        if
        :: atomic { !wake_sig[c] -> wake_sig[c] = 1 }; evfd[c] = 1
        :: else -> skip
        fi;
        c++
    :: else -> break
    od;
    c = 0
#endif
}
#endif

/* An outside thread spawns one fiber: the global queue, then wakep (and,
 * with STOP, destroys the scheduler once no fiber is live). */
proctype outside()
{
    byte c, w, was;
    bool ok;
    SKP_VAR
    d_step { gq++ NPUT(0, W_GQ); NBORN1 };
    wakep_body(ok);
#ifdef STOP
    destroy()
#endif
}

#if defined(STOP) && defined(NO_OUTSIDE)
proctype destroyer()
{
    byte c;
    destroy()
}
#endif

#ifdef CONTEND
/* The monitor's verdicts (C1), at any moment. */
proctype verdict()
{
    byte c;
end_verdict:
    do
    :: atomic { cflips > 0 -> cflips--; select(c : 0 .. N - 1); contended[c] = !contended[c]; c = 0 }
    od
}
#endif

#ifdef PACK
/* The monitor's packing decisions (K1), at any moment: a CPU packed while
 * no CPU stalls and another stays unpacked; a CPU unpacked, and kicked. */
proctype packer()
{
    byte c, d;
    bool ok;
end_packer:
    do
    :: atomic {
           pflips > 0 && !ANYHOG -> pflips--; select(c : 0 .. N - 1);
           d = 0;
           do
           :: d < N && (d == c || packed[d]) -> d++
           :: else -> break
           od;
           if :: d < N -> packed[c] = 1 :: else -> skip fi;
           c = 0; d = 0
       }
    :: atomic { pflips > 0 -> pflips--; select(c : 0 .. N - 1) };
       if
       :: packed[c] -> packed[c] = 0; kick(c, ok)
       :: else -> skip
       fi;
       c = 0; ok = 0
    od
}
#endif

/* Nothing can move: then no CPU may be parked beside work it could run or
 * steal (a lost wake-up), and the monitor may not sleep while a CPU is not
 * parked (at such a state that CPU runs a hog, whose inbox only the monitor
 * serves). With the monitor, such states recur (its looks follow them), so
 * each one is checked. */
#if (NHOG > 0 || defined(C4)) && !defined(NO_MONITOR)
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
#ifdef MSTALE
            /* work queued behind a stalled CPU is the monitor's to hand
             * to a thief (M5), checked at its looks, above */
            :: ISPARKED(i) -> work_visible_rest(i, r); assert(!r)
#else
            :: ISPARKED(i) -> work_visible(i, r); assert(!r)
#endif
#ifdef IO
            /* blocked in its set though a waker moved it out of
             * PARKED_POLL: the break (W3') did not reach it */
            :: !ISPARKED(i) && worker[i + 1]@end_poll -> work_visible(i, r); assert(!r)
#endif
            :: else -> skip
            fi;
#if defined(IO) && !defined(MONITOR)
            /* a ready descriptor's fiber is never stranded in its set */
            assert(rdy[i] == 0);
#ifndef IO_SHARED
            /* (c) a set with waiters has its CPU blocked in it (every
             * worker is parked here: no hog) */
            assert(nwait[i] == 0 || worker[i + 1]@end_poll);
#endif
#endif
#if defined(TIMERS) && !defined(MONITOR)
            /* nor a sleeping fiber behind its CPU's timer */
            assert(tmr[i] == 0);
#endif
            i++
        :: else -> break
        od;
        i = 0;
#if defined(IO_SHARED) && !defined(MONITOR)
        /* (c) the one set: at most one CPU blocked in it, and while fibers
         * wait on it (every worker parked here), the role's holder is */
        c = 0;
        do
        :: i < N -> if :: worker[i + 1]@end_poll -> c++ :: else -> skip fi; i++
        :: else -> break
        od;
        assert(c <= 1);
        if
        :: nwait[0] > 0 -> assert(poller != NONE && c == 1);
                           i = 0;
                           do
                           :: i < N -> assert(i != poller || worker[i + 1]@end_poll); i++
                           :: else -> break
                           od
        :: else -> skip
        fi;
        i = 0;
        c = 0;
#endif
        r = 0;
#ifdef STOP
        /* shutdown: no worker is left parked, or in its set, for ever */
        if
        :: stopping ->
            i = 0;
            do
            :: i < N -> assert(exited[i]); i++
            :: else -> break
            od;
            i = 0
        :: else -> skip
        fi;
#endif
#ifdef NAMED
        /* each queue holds the fibers placed there, no more, no fewer */
        i = 0;
        do
        :: i < N ->
            count_is(W_INB(i), inbox[i]); count_is(W_NXT(i), nxt[i]); count_is(W_SBN(i), sb_nxt[i]);
            count_is(W_RING(i), ring[i]); count_is(W_SBR(i), sb_ring[i]);
#ifdef BOUND
            count_is(W_BL(i), bl[i]);
#endif
            i++
        :: else -> break
        od;
        i = 0;
        count_is(W_GQ, gq);
#endif
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
#ifdef IO
        run kernel();
#endif
#ifdef MONITOR
        run monitor();
#endif
#ifdef CONTEND
        run verdict();
#endif
#ifdef PACK
        run packer();
#endif
#ifndef NO_OUTSIDE
        run outside();
#else
        gq = 1 NPUT(0, W_GQ);
        NBORN1;
#ifdef STOP
        run destroyer();
#endif
#endif
        run lost()
    }
}
