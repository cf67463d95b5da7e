/*
 * The poller: one epoll instance per scheduler (io_poller=shared) or one
 * per CPU (percpu, below), driven by the workers themselves (no poller
 * thread), as Go's netpoller is driven by its Ms.
 *
 * Every fd a fiber waits on is registered once, edge-triggered for input,
 * output and hang-up, with (sequence, fd) in epoll_data (fd.c). The eventfd
 * `evfd` sits in the same set, level-triggered, so that a CPU blocked in
 * epoll_wait can be woken like one blocked on its futex.
 *
 * Who polls:
 *   - an idle CPU, before it steals and every 4th pass while it spins: a
 *     non-blocking poll, one CPU at a time (`polling`: concurrent epoll_wait
 *     calls contend on the epoll lock, golang/go#65064). It polls even while
 *     another CPU blocks in epoll_wait: an event it takes runs here at once,
 *     on a CPU that is awake, instead of after the blocked CPU's wake-up
 *     (the kernel wakes that one anyway; it finds nothing and sleeps on in
 *     the kernel). On a 1-connection echo this keeps client and server on
 *     one CPU, as Go's netpoller does;
 *   - a busy CPU, every io_tick picks or when io_poll_us passed since the
 *     last poll anywhere, so fibers never starve I/O (Go's sysmon polls after
 *     10 ms, Tokio every 61 ticks); a pick counts when the CPU has a fiber to
 *     run next (one that is about to go idle polls as an idle CPU);
 *   - a parking CPU that takes the poller role (`poller`, one CPU at a time,
 *     only while fibers wait on fds) blocks in epoll_wait instead of on its
 *     futex, until its earliest timer. While any CPU is parked and fibers
 *     wait for I/O, one parked CPU is in epoll, so the last CPU to park blocks
 *     there when no other does - except while another CPU spins: then the
 *     parking CPU leaves the role to the spinner's polls for the length of a
 *     spin and looks again, and renews the deferral, doubled up to 1 ms,
 *     while the awake CPUs keep polling (io_claim).
 *
 * The park protocol of src/core/park.c, extended (P1-P4, W1-W3 there), as
 * this file's park backend (core/park.h, registered at load):
 *   P1'. the parking CPU claims the role (CAS poller -1 -> cpu) and stores
 *        state = PARKED_POLL instead of PARKED (seq_cst);
 *   P2, P3 as for PARKED; if P3 finds work it releases the role;
 *   P4'. epoll_wait(epfd, earliest timer); on return the role is released
 *        (poller = -1), the core leaves PARKED_POLL (unpark), and only then
 *        are the events dispatched, so the wake-ups they cause never target
 *        this CPU's own eventfd.
 *   W3'. a waker that sees PARKED_POLL CASes it to RUNNING (as W3) and
 *        breaks the poll:
 *          B1. CAS wake_sig 0 -> 1; the loser does nothing more: a write is
 *              outstanding, its count is still in evfd;
 *          B2. the winner writes 1 to evfd;
 *          B3. only the role holder reads evfd, then stores wake_sig = 0,
 *              both before it gives the role up; non-blocking polls
 *              leave evfd alone;
 *          B4. evfd is level-triggered: while its count is not 0 every
 *              epoll_wait reports it, and a non-blocking poll that took the
 *              event puts it back and wakes the blocked poller (the kernel's
 *              ep_done_scan), so the role holder always sees it.
 *        A poller that parked at P1' either sees the waker's fiber at P3, or
 *        the waker saw PARKED_POLL at W3' and evfd's count makes epoll_wait
 *        return (B2/B4): no wake-up is lost. wake_sig = 1 while a poller
 *        parks implies a count in evfd (B3 clears it only after the read),
 *        so a B1 loser can rely on it.
 *
 * Where woken fibers go: each ready fd's waiters are woken through the
 * policy (usched__wake with USCHED_SEL_IO), with their previous CPU, like
 * any other wake-up; the counters io_wake_same_cpu / same_llc / elsewhere
 * say where they went.
 *
 * io_poller=percpu: everything above per set (struct usched__ioset), one
 * set per CPU. An fd is in the set of its home CPU: for a TCP socket the
 * CPU its packets arrive on (SO_INCOMING_CPU, pinned workers only), else
 * its fiber's; it moves with hysteresis (fd.c, home_follow). Each CPU polls
 * and blocks in its own set only, with no deferral (io_claim); an idle CPU
 * whose set is empty takes readiness from a set its busy owner left
 * unpolled IO_STEAL_AFTER_NS (io_poll_idle). One more step of the park
 * protocol, since a CPU may park on its futex while a fiber elsewhere adds
 * a waiter to its set:
 *   P3''. after its seq_cst store of PARKED the CPU reads its set's waiter
 *         count (io_pending) and, finding one, goes back to P1'; the fiber
 *         that waits increments that count (seq_cst, fd.c) and then kicks
 *         the home if it sees it PARKED. One of the two sees the other.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "base/fault.h"
#include "core/pin.h"
#include "core/place.h"
#include "io/io_impl.h"

#define EV_WAKE UINT64_MAX        /* epoll_data of evfd */
#define EV_TIMER (UINT64_MAX - 1) /* epoll_data of tfd */
/* The bounds of a poller deferral (io_claim): the shortest,
 * for spin_us 0 (a spinner still makes a full round of 4 passes), and the
 * longest, for a large spin_us (readiness waits at most that long when the
 * spinner finds work). Not tuned. */
#define IO_DEFER_MIN_NS 20000ull
#define IO_DEFER_MAX_NS 1000000ull

static _Atomic uint64_t next_io_id = 1;
static _Atomic int pwait2_missing; /* epoll_pwait2 returned ENOSYS once */


/* ---- start, create, finish ------------------------------------------------ */

/* The soft RLIMIT_NOFILE before io_start raised it, and the value
 * it set; written once, before any fork can run the handler. */
static struct rlimit nofile_orig, nofile_raised;

/* A child process gets the soft limit back (Go restores it before exec):
 * programs that use select(2) break on fds past FD_SETSIZE. Unless someone
 * changed it since. posix_spawn runs no fork handlers (docs/io.md). */
static void nofile_restore_child(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur == nofile_raised.rlim_cur &&
        rl.rlim_max == nofile_raised.rlim_max)
        setrlimit(RLIMIT_NOFILE, &nofile_orig);
}

static void io_start(usched_t *s)
{
    (void)s;
    /* A server holds thousands of fds: raise the soft limit to the hard one
     * once a process (Go does the same since 1.19). */
    static _Atomic int raised;
    if (atomic_exchange(&raised, 1)) return;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        nofile_orig = rl;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0) {
            nofile_raised = rl;
            pthread_atfork(NULL, NULL, nofile_restore_child);
        }
    }
}

static void io_free(usched_t *s, struct usched__io *io)
{
    if (io->cpu)
        for (int c = 0; c < s->ncpus; c++) free(io->cpu[c].ev);
    free(io->cpu);
    if (io->set)
        for (int i = 0; i < io->nsets; i++) {
            if (io->set[i].epfd >= 0) close(io->set[i].epfd);
            if (io->set[i].evfd >= 0) close(io->set[i].evfd);
            if (io->set[i].tfd >= 0) close(io->set[i].tfd);
        }
    free(io->set);
    free(io);
}

/* An epoll set with its eventfd and timerfd: 0 or a negative errno. */
static int set_create(struct usched__ioset *st)
{
    st->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (st->epfd < 0)
        return usched__error(errno, "io: cannot create the poller: epoll_create1: %s", strerror(errno));
    st->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (st->evfd < 0)
        return usched__error(errno, "io: cannot create the poller: eventfd: %s", strerror(errno));
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EV_WAKE};
    if (epoll_ctl(st->epfd, EPOLL_CTL_ADD, st->evfd, &ev) < 0)
        return usched__error(errno, "io: cannot create the poller: epoll_ctl: %s", strerror(errno));
    atomic_store(&st->poller, -1);
    atomic_store(&st->last_poll_ns, usched__now_ns());
    /* The far deadlines' timer (io_park) */
    atomic_store(&st->tfd_at, UINT64_MAX);
    st->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (st->tfd < 0)
        return usched__error(errno, "io: cannot create the poller: timerfd_create: %s", strerror(errno));
    ev.data.u64 = EV_TIMER;
    if (epoll_ctl(st->epfd, EPOLL_CTL_ADD, st->tfd, &ev) < 0)
        return usched__error(errno, "io: cannot create the poller: epoll_ctl: %s", strerror(errno));
    return 0;
}

/* 0 or a negative errno: -ENOMEM, or -EMFILE/-ENFILE for want of fds. */
static int io_create(usched_t *s, struct usched__io **out)
{
    struct usched__io *io = usched__calloc(1, sizeof *io);
    if (!io) return usched__error(ENOMEM, "io: no memory for the poller");
    int rc = 0;
    io->percpu = usched__knob_get(&s->knobs, USCHED_KNOB_io_poller) == USCHED__IO_POLLER_PERCPU;
    io->nsets = io->percpu ? s->ncpus : 1;
    io->set = usched__aligned_alloc(64, sizeof(struct usched__ioset) * (size_t)io->nsets);
    if (!io->set) {
        rc = usched__error(ENOMEM, "io: no memory for the poller's %d epoll sets", io->nsets);
        goto fail;
    }
    memset(io->set, 0, sizeof(struct usched__ioset) * (size_t)io->nsets);
    for (int i = 0; i < io->nsets; i++) io->set[i].epfd = io->set[i].evfd = io->set[i].tfd = -1;
    io->cpu = usched__aligned_alloc(64, sizeof(struct usched__io_cpu) * (size_t)s->ncpus);
    if (!io->cpu) {
        rc = usched__error(ENOMEM, "io: no memory for the poller's %d CPUs", s->ncpus);
        goto fail;
    }
    memset(io->cpu, 0, sizeof(struct usched__io_cpu) * (size_t)s->ncpus);
    for (int c = 0; c < s->ncpus; c++) {
        io->cpu[c].ev = usched__calloc(IO_EVENTS, sizeof(struct epoll_event));
        if (!io->cpu[c].ev) {
            rc = usched__error(ENOMEM, "io: no memory for the poller's event buffers");
            goto fail;
        }
    }
    for (int i = 0; i < io->nsets; i++)
        if ((rc = set_create(&io->set[i])) < 0) goto fail;
    io->s = s;
    io->id = atomic_fetch_add(&next_io_id, 1);
    *out = io;
    return 0;
fail:
    io_free(s, io);
    return rc;
}

int usched__io_get(usched_t *s, struct usched__io **out)
{
    struct usched__io *io = atomic_load_explicit(&s->io, memory_order_acquire);
    if (io) {
        *out = io;
        return 0;
    }
    struct usched__io *n = NULL;
    int rc = io_create(s, &n);
    if (rc < 0) return rc;
    /* Pairs with the acquire load above and the relaxed loads of the worker
     * loop: a worker that sees the pointer late only polls later. */
    if (!atomic_compare_exchange_strong_explicit(&s->io, &io, n, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        io_free(s, n);
        *out = io;
        return 0;
    }
    *out = n;
    return 0;
}

static void io_fini(usched_t *s)
{
    usched__offload_quiesce();
    struct usched__io *io = atomic_exchange(&s->io, NULL);
    /* The fds registered here keep io->id as their tag; a later poller has
     * another id and registers them again. */
    if (io) io_free(s, io);
}

/* ---- polling ------------------------------------------------------------- */

/* epoll_wait failed (EBADF, EINVAL, EFAULT: the set is broken, which no
 * caller can repair): counted in io_poll_errors and said once on stderr, as
 * no caller of the library sees the worker's error. A blocking poll then
 * sleeps for its timeout, at most IO_BROKEN_SLEEP_NS, instead of returning
 * at once into a CPU-bound loop of failing polls; wake-ups then come at
 * that interval (a kick writes the eventfd the set no longer reports). */
#define IO_BROKEN_SLEEP_NS 10000000ull
static void poll_failed(struct usched__io *io, int err, uint64_t timeout_ns)
{
    usched__stat_inc(usched__self_wk(), io->s, USCHED_STAT_io_poll_errors);
    if (!atomic_exchange(&io->poll_err, err))
        fprintf(stderr, "usched: io: epoll_wait failed: %s; I/O readiness is now seen late (io_poll_errors)\n",
                strerror(err));
    if (timeout_ns == 0) return;
    uint64_t t = timeout_ns < IO_BROKEN_SLEEP_NS ? timeout_ns : IO_BROKEN_SLEEP_NS;
    struct timespec ts = {0, (long)t};
    nanosleep(&ts, NULL);
}

/* One epoll call on set st; timeout_ns 0 polls, UINT64_MAX blocks.
 * Returns the number of events (0 on EINTR or error). */
static int io_wait(struct usched__io *io, struct usched__ioset *st, struct epoll_event *ev, int max,
                   uint64_t timeout_ns)
{
    int n;
    if (timeout_ns == 0) {
        n = epoll_wait(st->epfd, ev, max, 0);
    } else if (!atomic_load_explicit(&pwait2_missing, memory_order_relaxed)) {
        struct timespec ts = usched__ns_timespec(timeout_ns);
        n = epoll_pwait2(st->epfd, ev, max, timeout_ns == UINT64_MAX ? NULL : &ts, NULL);
        if (n < 0 && errno == ENOSYS) {
            atomic_store(&pwait2_missing, 1); /* kernels before 5.11 */
            return io_wait(io, st, ev, max, timeout_ns);
        }
    } else {
        /* Milliseconds, rounded up so that a timer is never polled early. */
        int ms = timeout_ns == UINT64_MAX ? -1
                 : timeout_ns >= (uint64_t)INT32_MAX * 1000000ull ? INT32_MAX
                 : (int)((timeout_ns + 999999) / 1000000);
        n = epoll_wait(st->epfd, ev, max, ms);
    }
    atomic_store_explicit(&st->last_poll_ns, usched__now_ns(), memory_order_relaxed);
    if (n < 0 && errno != EINTR) poll_failed(io, errno, timeout_ns);
    return n < 0 ? 0 : n;
}

/* Wakes the waiters of the ready fds; returns how many fd events there
 * were (evfd's and tfd's are skipped: only the role holder consumes them,
 * in io_park, B3). */
static int dispatch(struct usched__io *io, struct epoll_event *ev, int n)
{
    (void)io;
    int fds = 0;
    for (int i = 0; i < n; i++) {
        uint64_t d = ev[i].data.u64;
        if (d == EV_WAKE || d == EV_TIMER) continue;
        fds++;
        int fd = (int)(uint32_t)d;
        struct usched__pd *pd = usched__pd_get(fd);
        if (pd) usched__pd_ready(pd, (uint32_t)(d >> 32), ev[i].events);
    }
    return fds;
}

/* A non-blocking poll of set st, unless another CPU polls it, or (busy)
 * someone holds its role. The number of events taken. */
static int poll_nb(struct usched__io *io, struct usched__ioset *st, struct usched__wk *w, int max, bool idle)
{
    if (!atomic_load_explicit(&st->nwaiters, memory_order_relaxed)) return 0;
    if (!idle && atomic_load_explicit(&st->poller, memory_order_relaxed) >= 0) return 0;
    if (atomic_load_explicit(&st->polling, memory_order_relaxed) ||
        atomic_exchange_explicit(&st->polling, 1, memory_order_acquire))
        return 0;
    struct epoll_event ev[IO_EVENTS_BUSY];
    if (max > IO_EVENTS_BUSY) max = IO_EVENTS_BUSY;
    int n = io_wait(io, st, ev, max, 0);
    atomic_store_explicit(&st->polling, 0, memory_order_release);
    usched__stat_inc(w, io->s, USCHED_STAT_io_polls);
    return dispatch(io, ev, n);
}

static void io_tick(struct usched__wk *w)
{
    usched_t *s = w->s;
    struct usched__io *io = atomic_load_explicit(&s->io, memory_order_acquire);
    if (!io) return;
    struct usched__io_cpu *c = &io->cpu[w->cpu];
    struct usched__ioset *st = usched__io_set_of(io, w->cpu);
    uint32_t tick = (uint32_t)usched__knob_get(&s->knobs, USCHED_KNOB_io_tick);
    if (++c->picks < tick || tick == 0) {
        /* The time bound, checked every 16 picks (a coarse clock read). */
        if ((c->picks & 15) != 0) return;
        uint64_t bound = (uint64_t)usched__knob_get(&s->knobs, USCHED_KNOB_io_poll_us) * 1000;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
        uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        /* The coarse clock lags by up to a tick (4 ms): compare generously. */
        if (now + 4000000 < atomic_load_explicit(&st->last_poll_ns, memory_order_relaxed) + bound)
            return;
    }
    c->picks = 0;
    poll_nb(io, st, w, IO_EVENTS_BUSY, false);
}

/* io_poller=percpu: how long another CPU's set may go unpolled by its owner
 * (busy running fibers) before an idle CPU takes its readiness. A busy
 * owner polls between fibers (io_tick); taking its events at once would
 * pull its connections off the CPU their packets arrive on. Not tuned. */
#define IO_STEAL_AFTER_NS 100000ull

static void io_poll_idle(struct usched__wk *w, bool own)
{
    usched_t *s = w->s;
    struct usched__io *io = atomic_load_explicit(&s->io, memory_order_acquire);
    if (!io) return;
    struct usched__ioset *mine = usched__io_set_of(io, w->cpu);
    if (!io->percpu) {
        poll_nb(io, mine, w, IO_EVENTS_BUSY, true);
        return;
    }
    /* (not own: w blocks in its own set next, which returns what a poll
     * would, one system call fewer) */
    if (own && poll_nb(io, mine, w, IO_EVENTS_BUSY, true)) return;
    /* Idle and its own set had nothing: readiness waiting behind a busy
     * CPU, nearest first (as stealing goes). Not in a set whose owner is
     * blocked in it: the kernel wakes that one. */
    const int *order = usched__cpus_near(s, w->cpu);
    uint64_t now = 0;
    for (int i = 0; i < s->ncpus; i++) {
        int c = order[i];
        if (c == w->cpu) continue;
        struct usched__ioset *st = &io->set[c];
        if (!atomic_load_explicit(&st->nwaiters, memory_order_relaxed) ||
            atomic_load_explicit(&s->wk[c]->state, memory_order_relaxed) == WK_PARKED_POLL)
            continue;
        if (!now) now = usched__now_ns();
        if (now < atomic_load_explicit(&st->last_poll_ns, memory_order_relaxed) + IO_STEAL_AFTER_NS) continue;
        int n = poll_nb(io, st, w, IO_EVENTS_BUSY, true);
        if (n > 0) {
            usched__stat_inc(w, s, USCHED_STAT_io_poll_stolen);
            return;
        }
    }
}

/* P1': the poller role, only while fibers wait on fds. Deferred while
 * another CPU spins: it polls every 4th pass and runs what it finds, so a
 * CPU blocked in epoll would only be woken by the kernel for events the
 * spinner takes anyway - a wake-up (on a VM an IPI) per message of a
 * connection the awake CPU serves, which also pulled its fibers over to the
 * woken CPU. The deferring CPU parks on its futex until the spin would be
 * over (*defer_until: spin_us, within IO_DEFER_MIN_NS..IO_DEFER_MAX_NS) and
 * then looks again (renew: the deferral ran out, no kick ended it).
 *
 * Renewed at twice the length, up to IO_DEFER_MAX_NS, while another CPU is
 * awake and some CPU polled since the deferral began: the awake CPUs serve
 * the I/O between their fibers, and a parked CPU that took the role now
 * would cost the next message's sender a wake-up of it (about 8 us here).
 * Without it the deferring CPU took the role at every deferral's end, as
 * the awake CPU was running a fiber, not spinning, that instant. When the
 * awake CPUs get more than they run, their wake-ups kick this CPU, which
 * ends the series; when they stop polling (a fiber that computes), the next
 * look finds no poll since and takes the role: readiness then waits at most
 * one deferral, IO_DEFER_MAX_NS.
 *
 * io_poller=percpu: a CPU whose own set has waiters always takes its own
 * set's role (nobody else may): the kernel then wakes this CPU, where the
 * packets of its connections arrive, and no other. */
static int io_claim(usched_t *s, struct usched__wk *w, bool renew, uint64_t *defer_until)
{
    *defer_until = UINT64_MAX;
    struct usched__io *io = atomic_load_explicit(&s->io, memory_order_acquire);
    if (!io) return USCHED__PARK_FUTEX;
    struct usched__ioset *st = usched__io_set_of(io, w->cpu);
    if (!atomic_load_explicit(&st->nwaiters, memory_order_seq_cst)) return USCHED__PARK_FUTEX;
    struct usched__io_cpu *c = &io->cpu[w->cpu];
    int why = USCHED__PARK_DEFERRED;
    if (!io->percpu && atomic_load_explicit(&st->poller, memory_order_relaxed) < 0) {
        uint64_t len = 0;
        if (renew && c->defer_ns &&
            (uint32_t)s->ncpus > atomic_load_explicit(&s->park.nparked, memory_order_seq_cst) &&
            atomic_load_explicit(&st->last_poll_ns, memory_order_relaxed) > c->defer_start) {
            len = 2 * c->defer_ns;
            if (len > IO_DEFER_MAX_NS) len = IO_DEFER_MAX_NS;
            why = USCHED__PARK_RENEWED;
        } else if (atomic_load_explicit(&s->park.nspinning, memory_order_seq_cst) > 0) {
            uint64_t spin = (uint64_t)usched__knob_get(&s->knobs, USCHED_KNOB_spin_us) * 1000;
            len = spin < IO_DEFER_MIN_NS ? IO_DEFER_MIN_NS : spin > IO_DEFER_MAX_NS ? IO_DEFER_MAX_NS : spin;
        }
        if (len) {
            uint64_t now = usched__now_ns();
            c->defer_ns = len;
            c->defer_start = now;
            *defer_until = now + len;
            return why; /* counted by the core (park.c) */
        }
    }
    c->defer_ns = 0;
    /* The role is taken by a CAS, only while free [model: ROLE]: a load and
     * a store would let two CPUs that both saw it free block in the set,
     * each the holder for itself. */
    int32_t none = -1;
    return atomic_compare_exchange_strong(&st->poller, &none, w->cpu) ? USCHED__PARK_CLAIMED : USCHED__PARK_FUTEX;
}

/* P3 found work after a successful claim: the role goes back [model: UNC],
 * or no other CPU could block in the set, and busy CPUs would not poll it
 * (io_tick leaves a set whose role is held). */
static void io_unclaim(usched_t *s, struct usched__wk *w)
{
    struct usched__io *io = atomic_load_explicit(&s->io, memory_order_acquire);
    atomic_store_explicit(&usched__io_set_of(io, w->cpu)->poller, -1, memory_order_release);
}

/* P3'' [model: P3N] (io_poller=percpu): w parks on its futex, having seen
 * no waiter in its own set at P1'. A fiber on another CPU that waits on an
 * fd of w's set adds itself to the set's count (seq_cst) and then kicks w
 * if it sees it PARKED (fd.c); w, after its seq_cst store of PARKED, looks
 * at the count again here: one of the two sees the other, and w then
 * blocks in its set. */
static bool io_pending(usched_t *s, struct usched__wk *w)
{
    struct usched__io *io = atomic_load_explicit(&s->io, memory_order_acquire);
    return io && io->percpu && atomic_load_explicit(&io->set[w->cpu].nwaiters, memory_order_seq_cst);
}

/* The stall monitor's look at w, stalled (monitor.c, serve_cpu): fibers
 * wait on descriptors no CPU will see unless one is woken. percpu: w's own
 * set has waiters, which only w or an idle CPU's poll takes [model: MIO].
 * shared: the one set has waiters and no CPU holds its role [model: MSH]:
 * the wake-up at the stall's first look may find a CPU between P1 and its
 * store of PARKED, which then sleeps on its futex with the set unwatched
 * (docs/model.md, monsh); a later look wakes it. */
static bool io_unwatched(usched_t *s, struct usched__wk *w)
{
    struct usched__io *io = atomic_load_explicit(&s->io, memory_order_acquire);
    if (!io) return false;
    struct usched__ioset *st = usched__io_set_of(io, w->cpu);
    if (!atomic_load_explicit(&st->nwaiters, memory_order_seq_cst)) return false;
    return io->percpu || atomic_load_explicit(&st->poller, memory_order_acquire) == -1;
}

/* A deadline this far away is left to the set's timerfd: a server whose
 * fibers read with an idle timeout (usched serve: 300 s) parks with a
 * deadline minutes away, and passing it to epoll_pwait2 armed and
 * cancelled a kernel timer at every park that slept (66 per MB of tbench
 * at 2 clients, 3-4% of the server's CPU). Nearer deadlines go to
 * epoll as before: a fiber that sleeps 1 ms in a loop would rearm the
 * timerfd at each park, a system call more. Not tuned. */
#define IO_TIMER_FAR_NS 50000000ull

/* The role holder's far deadline: true when st's timerfd expires at or
 * before deadline_ns, so that the poll may block without a timeout. The
 * timerfd is set only when its expiry is past or later than deadline_ns:
 * deadlines that move later (an idle timeout renewed by each request) cost
 * no system call, and the holder wakes early once, at the old expiry, and
 * sets it again. Setting it clears an expiry not yet read. */
static bool timer_far(struct usched__wk *w, struct usched__ioset *st, uint64_t deadline_ns, uint64_t now)
{
    if (deadline_ns - now < IO_TIMER_FAR_NS) return false;
    uint64_t at = atomic_load_explicit(&st->tfd_at, memory_order_relaxed);
    if (at <= now || at > deadline_ns) {
        struct itimerspec its = {.it_value = usched__ns_timespec(deadline_ns)};
        if (timerfd_settime(st->tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0) return false;
        atomic_store_explicit(&st->tfd_at, deadline_ns, memory_order_relaxed);
        usched__stat_add(&w->stats, USCHED_STAT_io_timer_sets, 1);
    }
    usched__stat_add(&w->stats, USCHED_STAT_io_timer_far, 1);
    return true;
}

/* P4': blocks in its set until deadline_ns (UINT64_MAX: no timer), releases
 * the role and buffers the events; io_dispatch runs them once the core has
 * left PARKED_POLL. */
static void io_park(struct usched__wk *w, uint64_t deadline_ns)
{
    struct usched__io *io = atomic_load_explicit(&w->s->io, memory_order_acquire);
    struct usched__io_cpu *c = &io->cpu[w->cpu];
    struct usched__ioset *st = usched__io_set_of(io, w->cpu);
    uint64_t timeout = UINT64_MAX;
    if (deadline_ns != UINT64_MAX) {
        uint64_t now = usched__now_ns();
        timeout = deadline_ns <= now ? 0 : timer_far(w, st, deadline_ns, now) ? UINT64_MAX : deadline_ns - now;
    }
    c->nev = timeout ? io_wait(io, st, c->ev, IO_EVENTS, timeout) : 0;
    /* B3 [model: B3], while still holding the role: a CPU that takes the
     * role after us must never find wake_sig set with evfd's count already
     * consumed. The timerfd's expiry is read here too (it is
     * level-triggered: unread, it would end every later poll at once). */
    for (int i = 0; i < c->nev; i++) {
        uint64_t v, d = c->ev[i].data.u64;
        if (d == EV_TIMER) {
            ssize_t r = read(st->tfd, &v, sizeof v);
            (void)r;
            atomic_store_explicit(&st->tfd_at, UINT64_MAX, memory_order_relaxed);
        }
        if (d != EV_WAKE) continue;
        ssize_t r = read(st->evfd, &v, sizeof v);
        (void)r;
        atomic_store_explicit(&st->wake_sig, 0, memory_order_release);
    }
    atomic_store_explicit(&st->poller, -1, memory_order_release);
}

static void io_dispatch(struct usched__wk *w)
{
    struct usched__io *io = atomic_load_explicit(&w->s->io, memory_order_acquire);
    struct usched__io_cpu *c = &io->cpu[w->cpu];
    int n = c->nev;
    c->nev = 0;
    dispatch(io, c->ev, n);
}

/* B1, B2 on one set: true when this call wrote its eventfd. */
static bool set_break(struct usched__ioset *st)
{
    uint32_t zero = 0;
    if (!atomic_compare_exchange_strong(&st->wake_sig, &zero, 1)) return false;
    uint64_t one = 1;
    ssize_t r = write(st->evfd, &one, sizeof one);
    (void)r;
    return true;
}

/* W3' [model: W3B]: B1, B2. w (NULL at shutdown: every set) is the role
 * holder of its set, or no one; either way the eventfd breaks the blocked
 * poll. True when this call wrote one (io_breaks, counted by the core). */
static bool io_break(usched_t *s, struct usched__wk *w)
{
    struct usched__io *io = atomic_load_explicit(&s->io, memory_order_acquire);
    if (!io) return false;
    if (w) return set_break(usched__io_set_of(io, w->cpu));
    bool any = false;
    for (int i = 0; i < io->nsets; i++) any |= set_break(&io->set[i]);
    return any;
}

/* ---- homes (io_poller=percpu) ---------------------------------------------- */

int usched__io_add(struct usched__io *io, int set, int fd, uint32_t seq)
{
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET,
                             .data.u64 = ((uint64_t)seq << 32) | (uint32_t)fd};
    int epfd = io->set[set].epfd;
    int rc = epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
    if (rc < 0 && errno == EEXIST) rc = epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev);
    return rc < 0 ? -errno : 0;
}

int usched__io_packet_cpu(struct usched__io *io, int fd)
{
    int os = -1;
    socklen_t len = sizeof os;
    if (!io->s->pinned || getsockopt(fd, SOL_SOCKET, SO_INCOMING_CPU, &os, &len) < 0) return -1;
    return usched__worker_of_os(io->s, os);
}

int usched__io_home_pick(struct usched__io *io, int fd, bool tcp, struct usched__wk *me)
{
    int c = tcp ? usched__io_packet_cpu(io, fd) : -1;
    if (!me) return c >= 0 ? c : 0;
    int home = usched__place_home(io->s, me, fd, USCHED_HOME_NEW | (tcp ? USCHED_HOME_TCP : 0), c, -1);
    if (home == c && c != me->cpu) usched__stat_inc(me, io->s, USCHED_STAT_io_home_packet);
    return home;
}

/* The "epoll shared" park backend (core/park.h): one epoll set per
 * scheduler, one parked CPU at a time blocked in it. */
static const struct usched__park_backend epoll_shared = {
    .name = "epoll-shared",
    .wake_stat = USCHED_STAT_io_breaks,
    .start = io_start,
    .fini = io_fini,
    .tick = io_tick,
    .poll = io_poll_idle,
    .claim = io_claim,
    .unclaim = io_unclaim,
    .wait = io_park,
    .dispatch = io_dispatch,
    .wake = io_break,
    .pending = io_pending,
    .unwatched = io_unwatched,
};

void usched__io_register(void)
{
    if (usched__park_io != &epoll_shared) usched__park_register(&epoll_shared);
}

/* Registered when the library is loaded, before any scheduler can start:
 * the core then parks in it whenever fibers wait on descriptors. */
__attribute__((constructor)) static void io_register_at_load(void)
{
    usched__io_register();
}
