/*
 * The public I/O calls. Each one tries its syscall without blocking first
 * and waits for readiness only on EAGAIN (or when the fd is known to be
 * drained, fd.c): a ready fd costs one syscall and no poller round trip.
 * Regular files go to the offload pool from fibers.
 *
 * Without blocking: on an fd with O_NONBLOCK (usched_socket, usched_accept,
 * or one that came so); on other sockets with MSG_DONTWAIT, leaving the
 * shared file description as it was; on other blocking fds (pipes, ttys,
 * devices usched did not create) after a poll(2) that found them ready,
 * writes capped at PIPE_BUF, which a ready pipe takes without blocking.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <limits.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "base/export.h"
#include "io/io_impl.h"

/* sys_once: try again after a short sleep - no readiness event will come
 * (connect(2) on a UNIX socket whose listener's backlog is full). */
#define RETRY_LATER (-4096)
#define RETRY_LATER_NS 1000000
/* The most a read or write moves in one call (Linux's MAX_RW_COUNT): a
 * larger call is cut short with room or data left. */
#define RW_MAX 0x7ffff000ul

enum { OP_READ, OP_READV, OP_RECV, OP_RECVFROM, OP_WRITE, OP_WRITEV, OP_SEND, OP_SENDTO,
       OP_ACCEPT, OP_CONNECT, OP_POLL };

struct req {
    int op;
    int flags;
    void *buf;
    size_t len;
    const struct iovec *iov;
    int iovcnt;
    struct sockaddr *addr;
    const struct sockaddr *caddr;
    socklen_t *addrlen;
    socklen_t caddrlen;
    short events;
    int connecting; /* OP_CONNECT: connect(2) returned EINPROGRESS */
    /* for the offload pool */
    int fd;
    struct usched__pd *pd;
    ssize_t result;
};

/* SIGPIPE: sockets write with MSG_NOSIGNAL; other fds (pipes) write with
 * SIGPIPE blocked around the call, and a SIGPIPE the call raised is consumed
 * before unblocking. Blocking it for good on the workers would save the
 * three syscalls, but the mask is inherited by every process a fiber starts
 * (fork, posix_spawn, system) and kept across exec. */
static ssize_t write_nosig(int fd, struct req *r, const struct iovec *iov, int cnt, size_t cap)
{
    sigset_t set, old, pending;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    sigpending(&pending);
    int was_pending = sigismember(&pending, SIGPIPE);
    ssize_t n;
    if (r->op == OP_WRITE) {
        n = write(fd, r->buf, r->len < cap ? r->len : cap);
    } else if (cap < SIZE_MAX) {
        struct iovec one = {NULL, 0}; /* the first non-empty entry, capped */
        for (int i = 0; i < cnt && !one.iov_len; i++) one = iov[i];
        if (one.iov_len > cap) one.iov_len = cap;
        n = writev(fd, &one, 1);
    } else {
        n = writev(fd, iov, cnt);
    }
    int err = n < 0 ? errno : 0;
    if (err == EPIPE && !was_pending && !sigismember(&old, SIGPIPE)) {
        struct timespec zero = {0, 0};
        sigtimedwait(&set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return err ? -err : n;
}

/* pd->pollfirst: 0 if fd is ready for the call's direction (it then cannot
 * block), -EAGAIN if not, -EBADF if it is not open. */
static int ready_now(int fd, short events)
{
    struct pollfd p = {.fd = fd, .events = events};
    int k = poll(&p, 1, 0);
    if (k < 0) return -errno;
    if (p.revents & POLLNVAL) return -EBADF;
    return k ? 0 : -EAGAIN;
}

static size_t op_len(const struct req *r);

/* One non-blocking attempt: a count, 0, or a negative errno (-EAGAIN to
 * wait). */
static ssize_t sys_once(struct usched__pd *pd, int fd, struct req *r)
{
    ssize_t n;
    /* (The other calls are for sockets only: on a pipe they fail at once.) */
    if (pd->pollfirst && (r->op == OP_READ || r->op == OP_READV || r->op == OP_WRITE || r->op == OP_WRITEV) &&
        op_len(r)) {
        int rc = ready_now(fd, r->op == OP_READ || r->op == OP_READV ? POLLIN : POLLOUT);
        if (rc < 0) return rc;
    }
    switch (r->op) {
    case OP_READ:
        n = pd->sock ? recv(fd, r->buf, r->len, MSG_DONTWAIT) : read(fd, r->buf, r->len);
        break;
    case OP_READV:
        if (pd->sock) {
            struct msghdr m = {.msg_iov = (struct iovec *)r->iov, .msg_iovlen = (size_t)r->iovcnt};
            n = recvmsg(fd, &m, MSG_DONTWAIT);
        } else {
            n = readv(fd, r->iov, r->iovcnt);
        }
        break;
    case OP_RECV: n = recv(fd, r->buf, r->len, r->flags | MSG_DONTWAIT); break;
    case OP_RECVFROM:
        n = recvfrom(fd, r->buf, r->len, r->flags | MSG_DONTWAIT, r->addr, r->addrlen);
        break;
    case OP_WRITE:
    case OP_WRITEV:
        if (pd->sock) {
            if (r->op == OP_WRITE) {
                n = send(fd, r->buf, r->len, MSG_NOSIGNAL | MSG_DONTWAIT);
            } else {
                struct msghdr m = {.msg_iov = (struct iovec *)r->iov, .msg_iovlen = (size_t)r->iovcnt};
                n = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
            }
            break;
        }
        return write_nosig(fd, r, r->iov, r->iovcnt, pd->pollfirst ? PIPE_BUF : SIZE_MAX);
    case OP_SEND: n = send(fd, r->buf, r->len, r->flags | MSG_NOSIGNAL | MSG_DONTWAIT); break;
    case OP_SENDTO:
        n = sendto(fd, r->buf, r->len, r->flags | MSG_NOSIGNAL | MSG_DONTWAIT, r->caddr, r->caddrlen);
        break;
    case OP_ACCEPT:
        n = accept4(fd, r->addr, r->addrlen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (n >= 0) usched__pd_fresh((int)n);
        break;
    case OP_CONNECT:
        if (!r->connecting) {
            if (connect(fd, r->caddr, r->caddrlen) == 0) return 0;
            if (errno == EINPROGRESS) {
                r->connecting = 1;
                return -EAGAIN;
            }
            /* A full UNIX backlog: no event will say when it has room. */
            return errno == EAGAIN ? RETRY_LATER : -errno;
        } else {
            int err = 0;
            socklen_t l = sizeof err;
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0) return -errno;
            if (err) return -err;
            struct sockaddr_storage ss;
            socklen_t sl = sizeof ss;
            if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0) return 0;
            return errno == ENOTCONN ? -EAGAIN : -errno; /* woken before the handshake ended */
        }
    case OP_POLL: {
        struct pollfd p = {.fd = fd, .events = r->events};
        int k = poll(&p, 1, 0);
        if (k < 0) return -errno;
        if (p.revents & POLLNVAL) return -EBADF;
        return k ? p.revents : -EAGAIN;
    }
    default: return -EINVAL;
    }
    return n < 0 ? -errno : n;
}

static int op_dir(const struct req *r)
{
    switch (r->op) {
    case OP_READ: case OP_READV: case OP_RECV: case OP_RECVFROM: case OP_ACCEPT: return IO_RD;
    case OP_POLL:
        return !(r->events & POLLOUT) ? IO_RD : !(r->events & (POLLIN | POLLPRI | POLLRDHUP)) ? IO_WR
                                                                                       : IO_ANY;
    default: return IO_WR;
    }
}

static size_t op_len(const struct req *r)
{
    if (r->op == OP_READV || r->op == OP_WRITEV) {
        size_t t = 0;
        for (int i = 0; i < r->iovcnt; i++) t += r->iov[i].iov_len;
        return t;
    }
    return r->len;
}

static void file_job(void *arg)
{
    struct req *r = arg;
    r->result = sys_once(r->pd, r->fd, r);
}

/* A call's deadline, taken when it first has to wait: a call that does not
 * wait reads no clock (the deadline then counts from the failed try, a
 * system call later than the call's start). */
struct deadline {
    uint64_t timeout_ns;
    uint64_t at; /* 0: not taken yet */
};

static uint64_t deadline_of(struct deadline *d)
{
    if (!d->at) d->at = usched__deadline_after(d->timeout_ns);
    return d->at;
}

/* Whether a call that moved n bytes proved the fd drained in its direction
 * (fd.c, "Drained"); only such calls record the mark and only they use it. */
static bool may_drain(const struct usched__pd *pd, const struct req *r)
{
    switch (r->op) {
    case OP_READ: case OP_READV: return pd->tcp;
    case OP_RECV: return pd->tcp && r->flags == 0;
    case OP_WRITE: case OP_WRITEV: return pd->stream && !pd->pollfirst;
    case OP_SEND: return pd->stream && r->flags == 0;
    default: return false;
    }
}

/* One call: the syscall, waiting on EAGAIN until it succeeds, fails, the
 * deadline passes (nowait: only tries) or the fd is closed. */
static ssize_t io_run(int fd, struct req *r, struct deadline *dl, bool nowait)
{
    if (fd < 0) return -EBADF;
    struct usched__pd *pd = usched__pd_get(fd);
    if (!pd && fd >= USCHED__PD_MAX_FD) return usched__error(EBADF, "io: fd %d is out of range", fd);
    if (!pd) return usched__error(ENOMEM, "io: no memory for the state of fd %d", fd);
    ssize_t n = usched__pd_enter(pd);
    if (n < 0) return n;
    usched_t *s = usched_self();
    struct usched__io *io = NULL;
    if (s && (n = usched__io_get(s, &io)) < 0) goto out;
    int kind = usched__pd_prepare(pd, fd, io);
    if (kind < 0) {
        n = kind;
        goto out;
    }
    if (kind == PD_FILE) {
        /* Regular files are always "ready" and block in the kernel. */
        r->fd = fd;
        r->pd = pd;
        if (r->op == OP_POLL) {
            n = sys_once(pd, fd, r);
        } else if (s) {
            int rc = usched__offload_run(file_job, r);
            n = rc < 0 ? rc : r->result;
        } else {
            file_job(r);
            n = r->result;
        }
        goto out;
    }
    if ((r->op == OP_ACCEPT || r->op == OP_CONNECT) && (n = usched__pd_set_nonblock(pd, fd)) < 0) goto out;
    int dir = op_dir(r);
    size_t want = op_len(r);
    /* The drained shortcut needs the poller's events (fibers only), and a
     * call that would wait for one. */
    bool drain = io && !nowait && may_drain(pd, r) && want <= RW_MAX;
    for (;;) {
        uint32_t e = usched__pd_ev(pd, dir);
        if (!drain || atomic_load_explicit(&pd->hup, memory_order_acquire) ||
            atomic_load_explicit(&pd->drained[dir], memory_order_relaxed) != (PD_DRAINED | e)) {
            n = sys_once(pd, fd, r);
            if (n == RETRY_LATER) {
                if (nowait) {
                    n = -EAGAIN; /* as connect(2) on a full UNIX backlog */
                    break;
                }
                if (usched__now_ns() + RETRY_LATER_NS > deadline_of(dl)) {
                    n = -ETIMEDOUT;
                    break;
                }
                usched_sleep_ns(RETRY_LATER_NS);
                if (atomic_load(&pd->closing)) { /* F1 wakes waiters, not this sleep */
                    n = -EBADF;
                    break;
                }
                continue;
            }
            if (n != -EAGAIN) {
                if (drain && n > 0 && (size_t)n < want)
                    atomic_store_explicit(&pd->drained[dir], PD_DRAINED | e, memory_order_relaxed);
                break;
            }
        }
        if (nowait) {
            /* connect(2)'s answer: the handshake goes on; usched_poll_fd
             * (POLLOUT) says when it ended, SO_ERROR how. */
            n = r->op == OP_CONNECT && r->connecting ? -EINPROGRESS : -EAGAIN;
            break;
        }
        n = usched__pd_wait(pd, fd, dir, e, deadline_of(dl));
        if (n < 0) break;
    }
out:
    usched__pd_exit(pd);
    return n;
}

/* Calls that move all their bytes (write, writev, send): loop over partial
 * transfers; a count once anything moved, else the error. */
static ssize_t io_all(int fd, struct req *r, uint64_t timeout_ns)
{
    struct deadline dl = {.timeout_ns = timeout_ns};
    bool nowait = timeout_ns == 0;
    size_t total = op_len(r), done = 0;
    const struct iovec *iov = r->iov; /* writev: position (idx, off) in it */
    int cnt = r->iovcnt, idx = 0;
    size_t off = 0;
    char *base = r->buf;
    struct iovec win[64];
    for (;;) {
        if (r->op == OP_WRITEV) {
            while (idx < cnt && off == iov[idx].iov_len) idx++, off = 0; /* empty entries */
            int k = cnt - idx < 64 ? cnt - idx : 64;
            memcpy(win, iov + idx, (size_t)k * sizeof *win);
            win[0].iov_base = (char *)win[0].iov_base + off;
            win[0].iov_len -= off;
            r->iov = win;
            r->iovcnt = k;
        } else {
            r->buf = base + done;
            r->len = total - done;
        }
        ssize_t n = io_run(fd, r, &dl, nowait);
        if (n < 0) return done ? (ssize_t)done : n;
        done += (size_t)n;
        if (done >= total) return (ssize_t)done;
        for (size_t k = (size_t)n; r->op == OP_WRITEV && k;) {
            size_t room = iov[idx].iov_len - off;
            if (k < room) {
                off += k;
                break;
            }
            k -= room;
            idx++;
            off = 0;
        }
    }
}

static int check_buf(const void *buf, size_t len, const char *call)
{
    if (!buf && len) return usched__error(EINVAL, "%s: buffer is NULL with length %zu", call, len);
    return 0;
}

static int check_iov(const struct iovec *iov, int iovcnt, const char *call)
{
    if (iovcnt < 0 || iovcnt > IOV_MAX)
        return usched__error(EINVAL, "%s: iovcnt %d out of range [0, %d]", call, iovcnt, IOV_MAX);
    if (!iov && iovcnt) return usched__error(EINVAL, "%s: iov is NULL with iovcnt %d", call, iovcnt);
    for (int i = 0; i < iovcnt; i++)
        if (!iov[i].iov_base && iov[i].iov_len)
            return usched__error(EINVAL, "%s: iov[%d] is NULL with length %zu", call, i, iov[i].iov_len);
    return 0;
}

static ssize_t io_one(int fd, struct req *r, uint64_t timeout_ns)
{
    struct deadline dl = {.timeout_ns = timeout_ns};
    return io_run(fd, r, &dl, timeout_ns == 0);
}

USCHED_EXPORT ssize_t usched_read(int fd, void *buf, size_t len, uint64_t timeout_ns)
{
    int rc = check_buf(buf, len, "read");
    if (rc < 0) return rc;
    struct req r = {.op = OP_READ, .buf = buf, .len = len};
    return io_one(fd, &r, timeout_ns);
}

USCHED_EXPORT ssize_t usched_write(int fd, const void *buf, size_t len, uint64_t timeout_ns)
{
    int rc = check_buf(buf, len, "write");
    if (rc < 0) return rc;
    struct req r = {.op = OP_WRITE, .buf = (void *)buf, .len = len};
    return len ? io_all(fd, &r, timeout_ns) : io_one(fd, &r, timeout_ns);
}

USCHED_EXPORT ssize_t usched_readv(int fd, const struct iovec *iov, int iovcnt, uint64_t timeout_ns)
{
    int rc = check_iov(iov, iovcnt, "readv");
    if (rc < 0) return rc;
    struct req r = {.op = OP_READV, .iov = iov, .iovcnt = iovcnt};
    return io_one(fd, &r, timeout_ns);
}

USCHED_EXPORT ssize_t usched_writev(int fd, const struct iovec *iov, int iovcnt, uint64_t timeout_ns)
{
    int rc = check_iov(iov, iovcnt, "writev");
    if (rc < 0) return rc;
    struct req r = {.op = OP_WRITEV, .iov = iov, .iovcnt = iovcnt};
    return op_len(&r) ? io_all(fd, &r, timeout_ns) : io_one(fd, &r, timeout_ns);
}

USCHED_EXPORT ssize_t usched_recv(int fd, void *buf, size_t len, int flags, uint64_t timeout_ns)
{
    int rc = check_buf(buf, len, "recv");
    if (rc < 0) return rc;
    struct req r = {.op = OP_RECV, .buf = buf, .len = len, .flags = flags};
    return io_one(fd, &r, timeout_ns);
}

USCHED_EXPORT ssize_t usched_send(int fd, const void *buf, size_t len, int flags, uint64_t timeout_ns)
{
    int rc = check_buf(buf, len, "send");
    if (rc < 0) return rc;
    struct req r = {.op = OP_SEND, .buf = (void *)buf, .len = len, .flags = flags};
    return len ? io_all(fd, &r, timeout_ns) : io_one(fd, &r, timeout_ns);
}

USCHED_EXPORT ssize_t usched_recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *addr,
                                      socklen_t *addrlen, uint64_t timeout_ns)
{
    int rc = check_buf(buf, len, "recvfrom");
    if (rc < 0) return rc;
    if (addr && !addrlen) return usched__error(EINVAL, "recvfrom: addr given without addrlen");
    struct req r = {.op = OP_RECVFROM, .buf = buf, .len = len, .flags = flags, .addr = addr,
                    .addrlen = addrlen};
    return io_one(fd, &r, timeout_ns);
}

USCHED_EXPORT ssize_t usched_sendto(int fd, const void *buf, size_t len, int flags,
                                    const struct sockaddr *addr, socklen_t addrlen, uint64_t timeout_ns)
{
    int rc = check_buf(buf, len, "sendto");
    if (rc < 0) return rc;
    struct req r = {.op = OP_SENDTO, .buf = (void *)buf, .len = len, .flags = flags, .caddr = addr,
                    .caddrlen = addrlen};
    return io_one(fd, &r, timeout_ns);
}

USCHED_EXPORT int usched_accept(int lfd, struct sockaddr *addr, socklen_t *addrlen, uint64_t timeout_ns)
{
    if (addr && !addrlen) return usched__error(EINVAL, "accept: addr given without addrlen");
    struct req r = {.op = OP_ACCEPT, .addr = addr, .addrlen = addrlen};
    return (int)io_one(lfd, &r, timeout_ns);
}

USCHED_EXPORT int usched_connect(int fd, const struct sockaddr *addr, socklen_t addrlen,
                                 uint64_t timeout_ns)
{
    if (!addr) return usched__error(EINVAL, "connect: address is NULL");
    struct req r = {.op = OP_CONNECT, .caddr = addr, .caddrlen = addrlen};
    return (int)io_one(fd, &r, timeout_ns);
}

USCHED_EXPORT int usched_socket(int domain, int type, int protocol)
{
    int fd = socket(domain, type | SOCK_NONBLOCK | SOCK_CLOEXEC, protocol);
    if (fd < 0) return usched__error(errno, "socket: %s", strerror(errno));
    usched__pd_fresh(fd);
    return fd;
}

USCHED_EXPORT int usched_poll_fd(int fd, short events, uint64_t timeout_ns)
{
    if (!(events & (POLLIN | POLLOUT)) || (events & ~(POLLIN | POLLOUT | POLLPRI | POLLRDHUP)))
        return usched__error(EINVAL, "poll_fd: events 0x%x: expected POLLIN, POLLOUT or both",
                             (unsigned)events & 0xffff);
    struct req r = {.op = OP_POLL, .events = events};
    return (int)io_one(fd, &r, timeout_ns);
}

USCHED_EXPORT int usched_close(int fd)
{
    if (fd < 0) return -EBADF;
    struct usched__pd *pd = usched__pd_get(fd);
    if (!pd) return close(fd) < 0 ? -errno : 0;
    return usched__pd_close(pd, fd);
}
