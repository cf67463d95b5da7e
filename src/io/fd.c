/*
 * Per-fd state (struct usched__pd): registration with the poller, waiting
 * for readiness, readiness events, and close.
 *
 * The state of fd n is slot n of a slab of 1024-slot chunks allocated on
 * first use and never freed, so an event that names a closed fd still finds
 * valid memory. Each pd carries a sequence number, bumped by usched_close
 * and by every fresh fd (accept, socket); the poller registers fds with
 * (seq, fd) in epoll_data and drops events whose seq is not the current one:
 * an fd closed and reused never wakes the wrong fiber (Go's fdseq).
 *
 * Readiness, per direction: ev[dir] counts the events the poller saw. A call
 * notes ev before its syscall; on EAGAIN it waits only if ev is unchanged
 * (else an event came in meanwhile: retry).
 *
 * Drained: when a call proves the kernel buffer empty (full) it records
 * drained = PD_DRAINED | ev, and the next call skips the syscall that would
 * return EAGAIN and waits, unless an event came in since (Tokio#4840). It is
 * safe only when the proof holds, so it is recorded and used only for
 *   - reads: a plain read, readv or recv without flags on a TCP socket that
 *     returned 0 < n < len. TCP's receive path stops short only when its
 *     queue is empty or at an urgent mark; urgent data is reported as
 *     EPOLLPRI, which turns the shortcut off, as do a hang-up and an error
 *     (the end of the stream arrives with the event of the data before it).
 *     Reads that leave data behind - MSG_PEEK, UNIX sockets (they stop at
 *     passed fds and credentials), packet-mode pipes - never record it;
 *   - writes: a plain write, writev or send on a stream that moved
 *     0 < n < len <= MAX_RW_COUNT bytes (the kernel caps larger calls);
 *   - calls that would wait: a timeout of 0 always makes its syscall, as
 *     nobody may be polling to advance ev.
 *
 * Close (usched_close), numbered for the code below:
 *   F1. under the pd lock: closing = CLOSING_WAKE, every waiter claimed with
 *       -EBADF, woken after the unlock;
 *   F2. calls in progress hold a reference (refs); a call takes it and then
 *       checks closing (both seq_cst, usched__pd_enter), close stores
 *       closing and then waits for refs == 0, so no call uses the fd once it
 *       is closed;
 *   F3. under the lock: seq++ and the pd forgets the incarnation
 *       (registration, kind, drained) and closing = CLOSING_RELEASE; then
 *       close(2); then, under the lock and only if no fresh fd took the
 *       number meanwhile (seq unchanged), closing = 0. The kernel drops
 *       the fd from the epoll set; an event already queued for it carries
 *       the old seq.
 *   F4. a call that starts while the number is being released
 *       (CLOSING_RELEASE) waits for close(2) to end and starts again: on a
 *       free number it fails with -EBADF, on a number that a fresh fd took
 *       meanwhile too (seq moved); only on a number some other open(2),
 *       pipe(2)... took does it go on, as a call made after usched_close
 *       returned would. So no call registers the dying fd (which would
 *       leave its mark on the pd for the next file of that number, never
 *       registered, and the call waiting forever), and no call of one
 *       incarnation waits on the next: usched__pd_fresh also fails any
 *       waiter left over (an fd closed with close(2)) with -EBADF.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fault.h"
#include "base/error.h"
#include "core/place.h"
#include "io/io_impl.h"

#define CHUNK_SHIFT 10
#define CHUNK (1 << CHUNK_SHIFT)
#define MAX_FD USCHED__PD_MAX_FD

enum { CLOSING_NONE = 0, CLOSING_WAKE, CLOSING_RELEASE }; /* pd->closing */

static struct usched__pd *_Atomic chunks[MAX_FD >> CHUNK_SHIFT];

struct usched__pd *usched__pd_get(int fd)
{
    if (fd < 0 || fd >= MAX_FD) return NULL;
    struct usched__pd *c = atomic_load_explicit(&chunks[fd >> CHUNK_SHIFT], memory_order_acquire);
    if (!c) {
        struct usched__pd *n = usched__calloc(CHUNK, sizeof *n);
        if (!n) return NULL;
        if (atomic_compare_exchange_strong_explicit(&chunks[fd >> CHUNK_SHIFT], &c, n,
                                                    memory_order_acq_rel, memory_order_acquire))
            c = n;
        else
            free(n);
    }
    return &c[fd & (CHUNK - 1)];
}

void usched__pd_lock(struct usched__pd *pd)
{
    usched__wq_lock(&pd->q[0]);
}

void usched__pd_unlock(struct usched__pd *pd)
{
    usched__wq_unlock(&pd->q[0]);
}

/* Under the lock: forget the incarnation (F3; a fresh fd). */
static void forget(struct usched__pd *pd)
{
    atomic_store_explicit(&pd->seq, atomic_load_explicit(&pd->seq, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    atomic_store_explicit(&pd->kind, PD_UNKNOWN, memory_order_relaxed);
    atomic_store_explicit(&pd->io_id, 0, memory_order_relaxed);
    atomic_store_explicit(&pd->home, -1, memory_order_relaxed);
    for (int d = 0; d < 2; d++) atomic_store_explicit(&pd->drained[d], 0, memory_order_relaxed);
    atomic_store_explicit(&pd->hup, 0, memory_order_relaxed);
    pd->nonblock = 0;
    pd->stream = pd->tcp = pd->sock = pd->pollfirst = 0;
}

void usched__pd_fresh(int fd)
{
    struct usched__pd *pd = usched__pd_get(fd);
    if (!pd) return;
    usched__pd_lock(pd);
    forget(pd);
    pd->nonblock = 1; /* accept4/socket were asked for O_NONBLOCK */
    atomic_store_explicit(&pd->closing, CLOSING_NONE, memory_order_relaxed);
    usched_task_t *chain = NULL;
    for (int d = 0; d < 3; d++) chain = usched__wq_claim_all(&pd->q[d], -EBADF, chain); /* F4 */
    usched__pd_unlock(pd);
    usched__wq_wake_chain(chain, 0);
}

/* Under the lock: what kind of file. Its flags stay as they are (item
 * "Descriptors usched did not create" in docs/io.md): sockets are read and
 * written with MSG_DONTWAIT, other blocking fds are polled before each call. */
static int classify(struct usched__pd *pd, int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0) return -errno;
    if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || S_ISBLK(st.st_mode)) {
        atomic_store_explicit(&pd->kind, PD_FILE, memory_order_release);
        return PD_FILE;
    }
    if (!pd->nonblock) {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0) return -errno;
        pd->nonblock = (fl & O_NONBLOCK) != 0;
    }
    if (S_ISSOCK(st.st_mode)) {
        int type = 0, proto = 0;
        socklen_t l = sizeof type;
        pd->sock = 1;
        pd->stream = getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) == 0 && type == SOCK_STREAM;
        l = sizeof proto;
        pd->tcp = pd->stream && getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l) == 0 &&
                  proto == IPPROTO_TCP;
    } else {
        pd->stream = S_ISFIFO(st.st_mode);
        pd->pollfirst = !pd->nonblock;
    }
    atomic_store_explicit(&pd->kind, PD_POLL, memory_order_release);
    return PD_POLL;
}

int usched__pd_set_nonblock(struct usched__pd *pd, int fd)
{
    int rc = 0;
    usched__pd_lock(pd);
    if (!pd->nonblock) {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
            rc = -errno;
        else
            pd->nonblock = 1;
    }
    usched__pd_unlock(pd);
    return rc;
}

int usched__pd_enter(struct usched__pd *pd)
{
    for (;;) {
        atomic_fetch_add(&pd->refs, 1); /* F2 */
        uint32_t c = atomic_load(&pd->closing);
        if (c == CLOSING_NONE) return 0;
        atomic_fetch_sub(&pd->refs, 1);
        if (c == CLOSING_WAKE) return -EBADF;
        /* F4: CLOSING_RELEASE. Wait for close(2) to end, then start afresh
         * on whatever the number is then - unless a fresh fd (accept,
         * socket) took it meanwhile: that incarnation began after this call
         * did, which belongs to the one just closed. */
        usched__pd_lock(pd);
        uint32_t seq = atomic_load_explicit(&pd->seq, memory_order_relaxed);
        usched__pd_unlock(pd);
        while (atomic_load(&pd->closing) == CLOSING_RELEASE) {
            if (usched__current())
                usched_yield();
            else
                sched_yield();
        }
        usched__pd_lock(pd);
        bool reused = atomic_load_explicit(&pd->seq, memory_order_relaxed) != seq;
        usched__pd_unlock(pd);
        if (reused) return -EBADF;
    }
}

void usched__pd_exit(struct usched__pd *pd)
{
    atomic_fetch_sub(&pd->refs, 1);
}

int usched__pd_prepare(struct usched__pd *pd, int fd, struct usched__io *io)
{
    int kind = (int)atomic_load_explicit(&pd->kind, memory_order_acquire);
    if (kind == PD_FILE) return kind;
    if (kind == PD_POLL && (!io || atomic_load_explicit(&pd->io_id, memory_order_acquire) == io->id))
        return kind;
    usched__pd_lock(pd);
    kind = (int)atomic_load_explicit(&pd->kind, memory_order_relaxed);
    if (kind == PD_UNKNOWN) kind = classify(pd, fd);
    if (kind == PD_POLL && io && atomic_load_explicit(&pd->io_id, memory_order_relaxed) != io->id) {
        uint32_t seq = atomic_load_explicit(&pd->seq, memory_order_relaxed);
        struct usched__wk *me = usched__self_wk();
        int home = io->percpu ? usched__io_home_pick(io, fd, pd->tcp, me) : -1;
        int rc = usched__io_add(io, home < 0 ? 0 : home, fd, seq);
        if (rc == 0) {
            atomic_store_explicit(&pd->home, home, memory_order_relaxed);
            pd->away = pd->sample = 0;
            atomic_store_explicit(&pd->io_id, io->id, memory_order_release);
        } else if (rc == -EPERM) {
            /* Not pollable (a file system that epoll refuses): offload. */
            kind = PD_FILE;
            atomic_store_explicit(&pd->kind, PD_FILE, memory_order_release);
        } else {
            kind = rc;
        }
    }
    usched__pd_unlock(pd);
    return kind;
}

static uint32_t ev_count(struct usched__pd *pd, int dir)
{
    if (dir == IO_ANY)
        return atomic_load_explicit(&pd->ev[IO_RD], memory_order_acquire) +
               atomic_load_explicit(&pd->ev[IO_WR], memory_order_acquire);
    return atomic_load_explicit(&pd->ev[dir], memory_order_acquire);
}

uint32_t usched__pd_ev(struct usched__pd *pd, int dir)
{
    return ev_count(pd, dir);
}

/* An outside thread: poll(2) in slices, watching for usched_close. */
static int wait_thread(struct usched__pd *pd, int fd, int dir, uint64_t deadline)
{
    short want = dir == IO_RD ? POLLIN : dir == IO_WR ? POLLOUT : (POLLIN | POLLOUT);
    for (;;) {
        if (atomic_load(&pd->closing)) return -EBADF;
        uint64_t now = usched__now_ns();
        if (now >= deadline) return -ETIMEDOUT;
        uint64_t left = (deadline - now + 999999) / 1000000;
        int ms = left < IO_THREAD_SLICE_MS ? (int)left : IO_THREAD_SLICE_MS;
        struct pollfd p = {.fd = fd, .events = want};
        int r = poll(&p, 1, ms);
        if (r > 0) return (p.revents & POLLNVAL) ? -EBADF : 0;
        if (r < 0 && errno != EINTR) return -errno;
    }
}

/* io_poller=percpu: the TCP socket's packets are looked at every
 * IO_SAMPLE_EVERY-th wait (a getsockopt), and an fd moves after
 * IO_REHOME_TCP such looks in a row, or IO_REHOME_FIBER waits in a row
 * of its fiber on another CPU (other descriptors): hysteresis, so that a
 * connection whose fiber or client wanders for a moment stays. Not tuned. */
#define IO_SAMPLE_EVERY 16
#define IO_REHOME_TCP 2
#define IO_REHOME_FIBER 4

/* Under the lock, io_poller=percpu, before a wait on worker me: the set the
 * fd is in, after moving it where it belongs: where the policy's io_home
 * says, by default a TCP socket's to the CPU its packets arrive on (where
 * the kernel runs its client, on loopback), any other fd's to its fiber's.
 * Moved only while nobody else waits on it (their counts stay in the set
 * they were made in). */
static int home_follow(struct usched__pd *pd, int fd, struct usched__io *io, struct usched__wk *me)
{
    int home = atomic_load_explicit(&pd->home, memory_order_relaxed);
    int packet = -1;
    if (io->s->ncpus == 1) return home; /* one set: nowhere to move, nothing to sample */
    if (pd->tcp) {
        /* K5 (monitor.c): homed on a packed CPU, it asks at once */
        if (++pd->sample < IO_SAMPLE_EVERY && (home < 0 || !usched__wk_packed(io->s->wk[home]))) return home;
        pd->sample = 0;
        packet = usched__io_packet_cpu(io, fd);
    }
    int want = usched__place_home(io->s, me, fd, pd->tcp ? USCHED_HOME_TCP : 0, packet, home);
    if (want == home) {
        pd->away = 0;
        return home;
    }
    if (++pd->away < (pd->tcp ? IO_REHOME_TCP : IO_REHOME_FIBER)) return home;
    for (int d = 0; d < 3; d++)
        if (usched__wq_len(&pd->q[d])) return home;
    /* The new set first: an fd added to an epoll set reports the readiness
     * it has now, so nothing is lost in between; an event the old set
     * still reports is harmless (a spurious wake-up, the call retries). */
    if (usched__io_add(io, want, fd, atomic_load_explicit(&pd->seq, memory_order_relaxed)) < 0) return home;
    (void)epoll_ctl(io->set[home].epfd, EPOLL_CTL_DEL, fd, NULL);
    atomic_store_explicit(&pd->home, want, memory_order_relaxed);
    pd->away = 0;
    usched__stat_inc(me, io->s, USCHED_STAT_io_rehomes);
    return want;
}

int usched__pd_wait(struct usched__pd *pd, int fd, int dir, uint32_t seen, uint64_t deadline)
{
    usched_task_t *self = usched__current();
    if (!self) return wait_thread(pd, fd, dir, deadline);
    struct usched__io *io = atomic_load_explicit(&usched_self()->io, memory_order_acquire);
    usched__pd_lock(pd);
    if (atomic_load(&pd->closing)) {
        usched__pd_unlock(pd);
        return -EBADF;
    }
    if (ev_count(pd, dir) != seen) { /* an event came in since the syscall */
        usched__pd_unlock(pd);
        return 0;
    }
    struct usched__wk *me = usched__self_wk();
    int home = io->percpu ? home_follow(pd, fd, io, me) : -1;
    struct usched__ioset *st = &io->set[home < 0 ? 0 : home];
    struct usched__waiter w;
    usched__waiter_init(&w, USCHED__TBLK_io);
    usched__wq_push(&pd->q[dir], &w);
    w.lk = &pd->q[0];
    /* read at P1' and P3''; a seq_cst read-modify-write, so it comes before
     * the load of the home's state below [model: FD2] */
    atomic_fetch_add_explicit(&st->nwaiters, 1, memory_order_seq_cst);
    /* io_poller=percpu, a home that is not this CPU: if it sleeps on its
     * futex it must wake and block in its set (P3'' in poller.c) [model: FDK]. */
    if (home >= 0 && home != me->cpu &&
        atomic_load_explicit(&usched_self()->wk[home]->state, memory_order_seq_cst) == WK_PARKED &&
        usched__wk_kick(usched_self(), me, home))
        usched__stat_add(&me->stats, USCHED_STAT_io_home_kicks, 1);
    usched__trace_io_wait(fd);
    /* a deadline passed already times out at the wait (its timer is due) */
    int rc = usched__wq_wait_until(&pd->q[0], &w, deadline);
    atomic_fetch_sub_explicit(&st->nwaiters, 1, memory_order_relaxed);
    return rc;
}

void usched__pd_ready(struct usched__pd *pd, uint32_t seq, uint32_t events)
{
    struct usched__wk *w = usched__self_wk();
    usched__pd_lock(pd);
    if (atomic_load_explicit(&pd->seq, memory_order_relaxed) != seq) {
        usched__pd_unlock(pd);
        if (w) usched__stat_add(&w->stats, USCHED_STAT_io_stale, 1);
        return;
    }
    usched_task_t *chain = NULL;
    bool rd = events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR | EPOLLPRI);
    bool wr = events & (EPOLLOUT | EPOLLHUP | EPOLLERR);
    /* The end of the stream (or an error) comes with the event of the last
     * data, and a TCP read stops short at urgent data: a short read cannot
     * prove it consumed; never skip the syscall again (Tokio keeps
     * read-closed out of the readiness it clears). Stored before ev, whose
     * release store publishes it to the call that sees the new count. */
    if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR | EPOLLPRI))
        atomic_store_explicit(&pd->hup, 1, memory_order_release);
    if (rd) {
        atomic_store_explicit(&pd->ev[IO_RD], atomic_load_explicit(&pd->ev[IO_RD], memory_order_relaxed) + 1,
                              memory_order_release);
        chain = usched__wq_claim_all(&pd->q[IO_RD], 0, chain);
    }
    if (wr) {
        atomic_store_explicit(&pd->ev[IO_WR], atomic_load_explicit(&pd->ev[IO_WR], memory_order_relaxed) + 1,
                              memory_order_release);
        chain = usched__wq_claim_all(&pd->q[IO_WR], 0, chain);
    }
    if (rd || wr) chain = usched__wq_claim_all(&pd->q[IO_ANY], 0, chain);
    int home = atomic_load_explicit(&pd->home, memory_order_relaxed);
    usched__pd_unlock(pd);
    if (w) {
        usched__stat_add(&w->stats, USCHED_STAT_io_events, 1);
        w->io_home = home; /* place.c counts where the wake-ups go from it */
    }
    usched__wq_wake_chain(chain, USCHED__WAKE_IO);
    if (w) w->io_home = -1;
}

int usched__pd_close(struct usched__pd *pd, int fd)
{
    /* F1 */
    for (;;) {
        usched__pd_lock(pd);
        uint32_t c = atomic_load(&pd->closing);
        if (c == CLOSING_NONE) break;
        usched__pd_unlock(pd);
        if (c == CLOSING_WAKE) return -EBADF; /* another close is in progress */
        /* CLOSING_RELEASE: the number is being released, and this is a
         * close of whatever file takes it next: wait for that to end. */
        if (usched__current())
            usched_yield();
        else
            sched_yield();
    }
    atomic_store(&pd->closing, CLOSING_WAKE);
    usched_task_t *chain = NULL;
    for (int d = 0; d < 3; d++) chain = usched__wq_claim_all(&pd->q[d], -EBADF, chain);
    usched__pd_unlock(pd);
    usched__wq_wake_chain(chain, 0);
    /* F2: the store of closing before the loads of refs, under emulators
     * too (core/park.c, P2) */
    usched__full_fence();
    while (atomic_load(&pd->refs)) {
        if (usched__current())
            usched_yield();
        else
            sched_yield();
    }
    /* F3 */
    usched__pd_lock(pd);
    forget(pd);
    uint32_t seq = atomic_load_explicit(&pd->seq, memory_order_relaxed);
    atomic_store(&pd->closing, CLOSING_RELEASE);
    usched__pd_unlock(pd);
    int rc = close(fd) < 0 ? -errno : 0;
    usched__pd_lock(pd);
    if (atomic_load_explicit(&pd->seq, memory_order_relaxed) == seq) atomic_store(&pd->closing, CLOSING_NONE);
    usched__pd_unlock(pd);
    return rc;
}
