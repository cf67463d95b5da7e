/*
 * What every server here shares: the listening socket and its accept fiber,
 * one detached fiber per connection, the connection buffers and the
 * request/response loop, and the stop protocol.
 *
 * Stopping (srv_stop), in this order:
 *   1. `stopping` is set, so the accept fiber treats the end of its socket
 *      as the end of the server rather than an error.
 *   2. usched_close(listener): the accept fiber, blocked in usched_accept,
 *      returns -EBADF and leaves.
 *   3. Under the table lock, every open connection gets shutdown(SHUT_RDWR).
 *      A fiber blocked in usched_read on it sees end of file; one about to
 *      read sees it on its next read. The fd itself stays open: only its
 *      fiber closes it (after taking it out of the table under the same
 *      lock), so a number reused by the kernel is never shut down by mistake.
 *      A connection accepted after step 3 finds `stopping` set when it
 *      registers and ends at once.
 *   4. usched_wg_wait: every fiber of the server (accept fiber and
 *      connections) has returned, so the protocol state is quiet and can
 *      be checked.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/fault.h"
#include "servers.h"

/* The protocol table; each <proto>.c defines srv_proto_<name>. */
#define X(name) extern const struct srv_proto srv_proto_##name;
SRV_PROTOCOLS(X)
#undef X
const struct srv_proto *const srv_protos[] = {
#define X(name) &srv_proto_##name,
    SRV_PROTOCOLS(X)
#undef X
};
const int srv_nprotos = (int)(sizeof srv_protos / sizeof srv_protos[0]);

const struct srv_proto *srv_proto_find(const char *name)
{
    for (int i = 0; i < srv_nprotos; i++)
        if (!strcmp(srv_protos[i]->name, name)) return srv_protos[i];
    return NULL;
}

/* ---- connection buffers --------------------------------------------------------- */

#define CONN_IN_INITIAL 16384
#define CONN_OUT_INITIAL 16384
#define CONN_SHRINK_ABOVE (4 * CONN_IN_INITIAL) /* a buffer larger than this shrinks back when idle */

/* The idle timeouts' clock: the coarse one, a few nanoseconds against tens
 * for the precise one on a virtual machine, read up to three times a
 * request; a tick (1-10 ms) off is nothing to a timeout of seconds. */
static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* How far now_ns may lag the precise clock: its tick. */
static uint64_t tick_ns(void)
{
    static _Atomic uint64_t tick;
    uint64_t t = atomic_load_explicit(&tick, memory_order_relaxed);
    if (!t) {
        struct timespec res;
        t = clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 && (res.tv_sec || res.tv_nsec)
                ? (uint64_t)res.tv_sec * 1000000000u + (uint64_t)res.tv_nsec
                : 10000000u;
        atomic_store_explicit(&tick, t, memory_order_relaxed);
    }
    return t;
}

/* Records a change of the output or of the buffers' sizes. */
static void note_buffers(struct srv_conn *c)
{
    size_t mem = c->in_cap + c->out_cap;
    if (srv_pending(c) > c->out_hwm) c->out_hwm = srv_pending(c);
    if (mem > c->buf_hwm) c->buf_hwm = mem;
    if (c->buf_total && mem != c->buf_counted) {
        atomic_fetch_add_explicit(c->buf_total, mem - c->buf_counted, memory_order_relaxed); /* wraps down */
        c->buf_counted = mem;
    }
}

int srv_conn_init(struct srv_conn *c, int fd, size_t in_max)
{
    memset(c, 0, sizeof *c);
    c->fd = fd;
    c->in_max = in_max;
    c->in_cap = in_max < CONN_IN_INITIAL ? in_max : CONN_IN_INITIAL;
    c->in = usched__malloc(c->in_cap);
    c->out_cap = CONN_OUT_INITIAL;
    c->out = usched__malloc(c->out_cap);
    if (!c->in || !c->out) {
        srv_conn_free(c);
        return -ENOMEM;
    }
    note_buffers(c);
    return 0;
}

void srv_conn_free(struct srv_conn *c)
{
    free(c->in);
    free(c->out);
    c->in = c->out = NULL;
    c->in_cap = c->out_cap = 0;
    note_buffers(c);
}

void srv_put(struct srv_conn *c, const void *p, size_t n)
{
    if (c->out_failed) return;
    if (c->out_len + n > c->out_cap) {
        size_t cap = c->out_cap * 2;
        while (cap < c->out_len + n) cap *= 2;
        char *nb = usched__realloc(c->out, cap);
        if (!nb) {
            c->out_failed = true;
            return;
        }
        c->out = nb;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
    note_buffers(c);
}

void srv_put_ref(struct srv_conn *c, const void *p, size_t n)
{
    if (n < SRV_REF_MIN || c->nrefs == SRV_REFS || c->fd < 0 || c->out_failed) {
        srv_put(c, p, n);
        return;
    }
    c->refs[c->nrefs++] = (struct srv_ref){.at = c->out_len, .p = p, .n = n};
    c->ref_len += n;
    note_buffers(c);
}

void srv_puts(struct srv_conn *c, const char *s)
{
    srv_put(c, s, strlen(s));
}

void srv_printf(struct srv_conn *c, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof buf) {
        srv_put(c, buf, (size_t)n);
        return;
    }
    char *big = usched__malloc((size_t)n + 1);
    if (!big) {
        c->out_failed = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    srv_put(c, big, (size_t)n);
    free(big);
}

/* How long a read may wait: until the deadline. */
static uint64_t wait_ns(uint64_t deadline)
{
    if (!deadline) return USCHED_FOREVER;
    uint64_t now = now_ns();
    return deadline > now ? deadline - now : 0;
}

/* The buffer's bytes and the references, in order, in one writev. */
static ssize_t write_gathered(struct srv_conn *c, uint64_t timeout)
{
    struct iovec iov[2 * SRV_REFS + 1];
    int n = 0;
    size_t from = 0;
    for (int i = 0; i < c->nrefs; i++) {
        const struct srv_ref *r = &c->refs[i];
        if (r->at > from) iov[n++] = (struct iovec){.iov_base = c->out + from, .iov_len = r->at - from};
        iov[n++] = (struct iovec){.iov_base = (void *)r->p, .iov_len = r->n};
        from = r->at;
    }
    if (c->out_len > from) iov[n++] = (struct iovec){.iov_base = c->out + from, .iov_len = c->out_len - from};
    return usched_writev(c->fd, iov, n, timeout);
}

int srv_flush(struct srv_conn *c)
{
    if (c->out_failed) return -ENOMEM;
    if (c->fd < 0) { /* a unit test: keep the bytes, or with a bound count them as sent */
        if (c->out_max) c->out_len = 0;
        return 0;
    }
    size_t total = srv_pending(c);
    if (total == 0) return 0;
    /* a peer that does not read for idle_ns is as gone as one that does not write */
    uint64_t start = c->idle_ns ? now_ns() : 0;
    uint64_t timeout = c->idle_ns ? c->idle_ns : USCHED_FOREVER;
    ssize_t w = c->nrefs ? write_gathered(c, timeout) : usched_write(c->fd, c->out, c->out_len, timeout);
    if (w >= 0 && (size_t)w != total) /* stopped part-way: out of time, or the peer is gone */
        w = c->idle_ns && now_ns() - start + tick_ns() >= c->idle_ns ? -ETIMEDOUT : -EPIPE;
    if (w == -ETIMEDOUT) c->timed_out = true;
    if (w < 0) return (int)w;
    c->out_len = 0;
    c->nrefs = 0;
    c->ref_len = 0;
    if (c->out_cap > CONN_SHRINK_ABOVE) { /* a large reply has gone: give its memory back */
        char *nb = usched__realloc(c->out, CONN_OUT_INITIAL);
        if (nb) {
            c->out = nb;
            c->out_cap = CONN_OUT_INITIAL;
            note_buffers(c);
        }
    }
    return 0;
}

int srv_drain(struct srv_conn *c)
{
    if (c->out_max == 0 || srv_pending(c) < c->out_max || c->out_failed) return c->out_failed ? -ENOMEM : 0;
    int e = srv_flush(c);
    if (e < 0) c->out_failed = true;
    return e;
}

/* Moves the pending input to the front and makes room after it (growing the
 * buffer up to in_max). 0, -EMSGSIZE at in_max, or -ENOMEM. */
static int in_room(struct srv_conn *c)
{
    if (c->in_start > 0) {
        memmove(c->in, c->in + c->in_start, c->in_end - c->in_start);
        c->in_end -= c->in_start;
        c->in_start = 0;
    }
    if (c->in_end < c->in_cap) return 0;
    if (c->in_cap >= c->in_max) return -EMSGSIZE;
    size_t cap = c->in_cap * 2 < c->in_max ? c->in_cap * 2 : c->in_max;
    char *nb = usched__realloc(c->in, cap);
    if (!nb) return -ENOMEM;
    c->in = nb;
    c->in_cap = cap;
    note_buffers(c);
    return 0;
}

/* After a large request: an input buffer grown past CONN_SHRINK_ABOVE whose
 * pending bytes fit the initial size goes back to it. */
static void in_shrink(struct srv_conn *c)
{
    size_t pending = c->in_end - c->in_start;
    if (c->in_cap <= CONN_SHRINK_ABOVE || pending > CONN_IN_INITIAL) return;
    memmove(c->in, c->in + c->in_start, pending);
    c->in_start = 0;
    c->in_end = pending;
    char *nb = usched__realloc(c->in, CONN_IN_INITIAL);
    if (nb) {
        c->in = nb;
        c->in_cap = CONN_IN_INITIAL;
        note_buffers(c);
    }
}

ssize_t srv_fill(struct srv_conn *c)
{
    int e = in_room(c);
    if (e < 0) return e;
    uint64_t t = wait_ns(c->deadline);
    ssize_t r = t ? usched_read(c->fd, c->in + c->in_end, c->in_cap - c->in_end, t) : -ETIMEDOUT;
    if (r > 0) c->in_end += (size_t)r;
    if (r == -ETIMEDOUT) c->timed_out = true;
    return r;
}

/* Handles the complete requests pending in c->in, until the output reaches
 * out_max. Returns the last step's verdict (0: waiting for more input), or
 * 1 when it stopped for the output bound with input left. */
static ssize_t run_steps(struct srv_conn *c, srv_step_fn *step, void *st, bool *progress)
{
    while (c->in_start < c->in_end) {
        if (c->out_max && srv_pending(c) >= c->out_max) return 1;
        ssize_t k = step(st, c, c->in + c->in_start, c->in_end - c->in_start);
        if (k <= 0) return k;
        c->in_start += (size_t)k;
        *progress = true;
        if (c->out_failed) return -ENOMEM;
    }
    return 0;
}

void srv_conn_run(struct srv_conn *c, srv_step_fn *step, void *st)
{
    if (c->idle_ns && !c->deadline) c->deadline = now_ns() + c->idle_ns;
    for (;;) {
        bool progress = false;
        ssize_t k = run_steps(c, step, st, &progress);
        if (srv_flush(c) < 0 || k < 0) return;
        if (progress && c->idle_ns) c->deadline = now_ns() + c->idle_ns;
        if (k > 0) continue; /* the output bound stopped it: sent now, parse on */
        in_shrink(c);
        if (srv_fill(c) <= 0) return; /* end of file, error, timeout, or a request over in_max */
    }
}

ssize_t srv_conn_feed(struct srv_conn *c, srv_step_fn *step, void *st, const void *in, size_t n)
{
    const char *p = in;
    bool progress = false;
    while (n > 0) {
        int e = in_room(c);
        if (e < 0) return e;
        size_t take = c->in_cap - c->in_end < n ? c->in_cap - c->in_end : n;
        memcpy(c->in + c->in_end, p, take);
        c->in_end += take;
        p += take;
        n -= take;
        ssize_t k;
        while ((k = run_steps(c, step, st, &progress)) > 0) srv_flush(c); /* over out_max */
        if (k < 0) return k;
    }
    return 0;
}

/* ---- the server ------------------------------------------------------------------ */

#define REFUSE_IN_MAX 16384          /* what a refused connection may send before its error */
#define REFUSE_WAIT_NS 2000000000ull /* and how long it has to send it, and to read the error */
#define REFUSERS_MAX 64              /* refusals in progress at once; more are closed at once */

struct srv {
    const struct srv_proto *proto;
    void *state;
    usched_t *sched;
    int lfd;
    int spare_fd; /* /dev/null, given up to accept (and refuse) one connection when out of fds */
    bool closed;  /* srv_stop closed lfd (the stopping thread only) */
    int port;
    size_t max_output;
    uint64_t idle_ns;
    int max_conns;
    atomic_bool stopping; /* any thread; release store in srv_stop, acquire loads */
    usched_wg_t fibers;   /* accept fiber + connection fibers still running */
    usched_mutex_t lock;  /* guards conns, nserving, nrefusing */
    int *conns;           /* open connection fds, refused ones included (lock) */
    size_t nconns, cap_conns;
    int nserving, nrefusing; /* (lock) */
    /* relaxed counters */
    atomic_uint_fast64_t requests, accepted, refused, timed_out, failed;
    atomic_size_t out_hwm, buf_hwm, buf_total;
};

struct conn_arg {
    struct srv *v;
    int fd;
    bool refuse;
};

enum reg { REG_STOPPING, REG_SERVE, REG_REFUSE, REG_CLOSE };

/* Adds fd to the table: to be served, or refused when max_conns are
 * served. REG_CLOSE (fd not in the table): it cannot be refused politely,
 * as the protocol has no error for it, REFUSERS_MAX refusals are under way
 * or memory ran out. REG_STOPPING: the server is stopping (step 3). */
static enum reg conn_register(struct srv *v, int fd)
{
    enum reg r = REG_STOPPING;
    usched_mutex_lock(&v->lock);
    if (!atomic_load_explicit(&v->stopping, memory_order_acquire)) {
        r = v->nserving < v->max_conns                           ? REG_SERVE
            : v->proto->refuse && v->nrefusing < REFUSERS_MAX ? REG_REFUSE
                                                              : REG_CLOSE;
        if (r != REG_CLOSE && v->nconns == v->cap_conns) {
            size_t cap = v->cap_conns ? v->cap_conns * 2 : 64;
            int *nc = usched__realloc(v->conns, cap * sizeof *nc);
            if (nc) {
                v->conns = nc;
                v->cap_conns = cap;
            }
        }
        if (r != REG_CLOSE && v->nconns < v->cap_conns) {
            v->conns[v->nconns++] = fd;
            *(r == REG_SERVE ? &v->nserving : &v->nrefusing) += 1;
        } else {
            r = REG_CLOSE;
        }
    }
    usched_mutex_unlock(&v->lock);
    return r;
}

static void conn_unregister(struct srv *v, int fd, bool refused)
{
    usched_mutex_lock(&v->lock);
    for (size_t i = 0; i < v->nconns; i++)
        if (v->conns[i] == fd) {
            v->conns[i] = v->conns[--v->nconns];
            *(refused ? &v->nrefusing : &v->nserving) -= 1;
            break;
        }
    usched_mutex_unlock(&v->lock);
}

static void atomic_max(atomic_size_t *m, size_t x)
{
    size_t cur = atomic_load_explicit(m, memory_order_relaxed);
    while (cur < x && !atomic_compare_exchange_weak_explicit(m, &cur, x, memory_order_relaxed, memory_order_relaxed)) {
    }
}

/* Serves (or refuses) one connection, then closes it. */
static void conn_fiber(void *arg)
{
    struct conn_arg *a = arg;
    struct srv *v = a->v;
    int fd = a->fd;
    bool refuse = a->refuse;
    free(a);
    struct srv_conn c;
    if (srv_conn_init(&c, fd, refuse ? REFUSE_IN_MAX : v->proto->in_max) == 0) {
        c.buf_total = &v->buf_total;
        note_buffers(&c);
        c.out_max = v->max_output;
        c.idle_ns = v->idle_ns;
        if (!refuse) {
            v->proto->conn(v->state, &c);
        } else {
            /* the protocol's error, then a close that lets the peer read it:
             * stop sending, and wait (briefly) for the peer to close too */
            c.deadline = now_ns() + REFUSE_WAIT_NS;
            srv_conn_run(&c, v->proto->refuse, v->state);
            shutdown(fd, SHUT_WR);
            char sink[512];
            uint64_t t;
            while ((t = wait_ns(c.deadline)) > 0 && usched_read(fd, sink, sizeof sink, t) > 0) {
            }
            c.timed_out = false; /* a refusal that waits out its time is no idle connection */
        }
        atomic_fetch_add_explicit(&v->requests, c.requests, memory_order_relaxed);
        if (c.timed_out) atomic_fetch_add_explicit(&v->timed_out, 1, memory_order_relaxed);
        if (c.out_failed) atomic_fetch_add_explicit(&v->failed, 1, memory_order_relaxed);
        atomic_max(&v->out_hwm, c.out_hwm);
        atomic_max(&v->buf_hwm, c.buf_hwm);
        srv_conn_free(&c);
    } else {
        atomic_fetch_add_explicit(&v->failed, 1, memory_order_relaxed);
    }
    conn_unregister(v, fd, refuse);
    usched_close(fd);
    usched_wg_done(&v->fibers);
}

/* Out of descriptors: gives up the spare one to accept a waiting
 * connection and close it at once, so that its client learns it is refused
 * instead of waiting in the backlog; then takes the spare back. */
static void refuse_one(struct srv *v)
{
    if (v->spare_fd < 0) return;
    close(v->spare_fd);
    v->spare_fd = -1;
    int fd = usched_accept(v->lfd, NULL, NULL, 0);
    if (fd >= 0) {
        atomic_fetch_add_explicit(&v->accepted, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&v->refused, 1, memory_order_relaxed);
        usched_close(fd);
    }
    v->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void accept_fiber(void *arg)
{
    struct srv *v = arg;
    int one = 1;
    for (;;) {
        /* v->lfd never changes while this fiber runs (srv_stop closes it but
         * leaves the number); stopping, set before the close, ends the loop
         * whether the close found this fiber waiting (-EBADF) or not. */
        if (atomic_load_explicit(&v->stopping, memory_order_acquire)) break;
        int fd = usched_accept(v->lfd, NULL, NULL, USCHED_FOREVER);
        if (fd < 0) {
            if (atomic_load_explicit(&v->stopping, memory_order_acquire)) break;
            if (fd == -ECONNABORTED || fd == -EINTR || fd == -EPROTO) continue;
            if (fd == -EMFILE || fd == -ENFILE || fd == -ENOBUFS || fd == -ENOMEM) {
                /* out of descriptors or memory: refuse the first in line,
                 * let connections finish, then retry */
                if (fd == -EMFILE || fd == -ENFILE) refuse_one(v);
                usched_sleep_ns(10 * 1000 * 1000);
                continue;
            }
            fprintf(stderr, "usched serve %s: accept: %s; no longer accepting\n", v->proto->name,
                    usched_strerror(fd));
            break;
        }
        atomic_fetch_add_explicit(&v->accepted, 1, memory_order_relaxed);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* fails harmlessly off TCP */
        struct conn_arg *a = usched__malloc(sizeof *a);
        enum reg r = a ? conn_register(v, fd) : REG_CLOSE;
        if (r == REG_REFUSE || r == REG_CLOSE) atomic_fetch_add_explicit(&v->refused, 1, memory_order_relaxed);
        if (r == REG_STOPPING || r == REG_CLOSE) {
            free(a);
            usched_close(fd);
            continue;
        }
        *a = (struct conn_arg){.v = v, .fd = fd, .refuse = r == REG_REFUSE};
        usched_wg_add(&v->fibers, 1);
        int e = usched_spawn(usched_self(), NULL, conn_fiber, a);
        if (e < 0) {
            usched_wg_done(&v->fibers);
            conn_unregister(v, fd, r == REG_REFUSE);
            usched_close(fd);
            free(a);
        }
    }
    usched_wg_done(&v->fibers);
}

/* Parses host into a sockaddr for port. */
static int make_addr(const char *host, int port, struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        *len = sizeof *in4;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        *len = sizeof *in6;
        return 0;
    }
    return -EINVAL;
}

int srv_start(usched_t *s, const struct srv_proto *p, const struct srv_opts *o, struct srv **out,
              char *err, size_t len)
{
    const char *host = o->host && *o->host ? o->host : "127.0.0.1";
    int port = o->port < 0 ? p->default_port : o->port;
    struct sockaddr_storage ss;
    socklen_t sl;
    *out = NULL;
    if (port > 65535) {
        snprintf(err, len, "port %d: must be in [0, 65535]", port);
        return -EINVAL;
    }
    if (make_addr(host, port, &ss, &sl) < 0) {
        snprintf(err, len, "address '%s': not a numeric IPv4 or IPv6 address", host);
        return -EINVAL;
    }
    struct srv *v = usched__calloc(1, sizeof *v);
    if (!v) {
        snprintf(err, len, "out of memory");
        return -ENOMEM;
    }
    v->spare_fd = -1;
    v->proto = p;
    v->sched = s;
    v->max_output = o->max_output ? o->max_output : SRV_MAX_OUTPUT;
    long idle = o->idle_timeout_ms ? o->idle_timeout_ms : SRV_IDLE_TIMEOUT_MS;
    v->idle_ns = idle > 0 ? (uint64_t)idle * 1000000u : 0;
    v->max_conns = o->max_conns > 0 ? o->max_conns : SRV_MAX_CONNS;
    v->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1, r;
    if (v->lfd < 0) {
        r = -errno;
        snprintf(err, len, "socket: %s", strerror(errno));
        free(v);
        return r;
    }
    setsockopt(v->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(v->lfd, (struct sockaddr *)&ss, sl) < 0 || listen(v->lfd, 4096) < 0) {
        r = -errno;
        snprintf(err, len, "bind %s:%d: %s", host, port, strerror(errno));
        close(v->lfd);
        free(v);
        return r;
    }
    struct sockaddr_storage bound;
    socklen_t bl = sizeof bound;
    getsockname(v->lfd, (struct sockaddr *)&bound, &bl);
    v->port = ntohs(bound.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port
                                               : ((struct sockaddr_in6 *)&bound)->sin6_port);
    if (p->init && p->init(o, &v->state, err, len) < 0) {
        close(v->lfd);
        free(v);
        return -EINVAL;
    }
    v->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC); /* -1 is no error: refuse_one does without */
    usched_mutex_init(&v->lock);
    usched_wg_init(&v->fibers);
    usched_wg_add(&v->fibers, 1);
    r = usched_spawn(s, NULL, accept_fiber, v);
    if (r < 0) {
        snprintf(err, len, "spawn of the accept fiber: %s", usched_strerror(r));
        usched_wg_done(&v->fibers);
        srv_stop(v);
        srv_free(v);
        return r;
    }
    *out = v;
    return 0;
}

int srv_port(const struct srv *v)
{
    return v->port;
}

uint64_t srv_requests(const struct srv *v)
{
    return atomic_load_explicit(&v->requests, memory_order_relaxed);
}

uint64_t srv_connections(const struct srv *v)
{
    return atomic_load_explicit(&v->accepted, memory_order_relaxed);
}

void srv_stats(const struct srv *v, struct srv_stats *st)
{
    struct srv *w = (struct srv *)v; /* the lock, for a consistent count of open connections */
    usched_mutex_lock(&w->lock);
    st->open = v->nconns;
    usched_mutex_unlock(&w->lock);
    st->connections = atomic_load_explicit(&v->accepted, memory_order_relaxed);
    st->requests = atomic_load_explicit(&v->requests, memory_order_relaxed);
    st->refused = atomic_load_explicit(&v->refused, memory_order_relaxed);
    st->timed_out = atomic_load_explicit(&v->timed_out, memory_order_relaxed);
    st->failed = atomic_load_explicit(&v->failed, memory_order_relaxed);
    st->out_hwm = atomic_load_explicit(&v->out_hwm, memory_order_relaxed);
    st->buf_hwm = atomic_load_explicit(&v->buf_hwm, memory_order_relaxed);
    st->buffers = atomic_load_explicit(&v->buf_total, memory_order_relaxed);
}

int srv_stop(struct srv *v)
{
    if (v->lfd < 0 || v->closed) return 0;
    atomic_store_explicit(&v->stopping, true, memory_order_release); /* step 1 */
    usched_close(v->lfd);                                            /* step 2 */
    v->closed = true; /* the caller's own flag: the accept fiber reads v->lfd */
    usched_mutex_lock(&v->lock); /* step 3 */
    for (size_t i = 0; i < v->nconns; i++) shutdown(v->conns[i], SHUT_RDWR);
    usched_mutex_unlock(&v->lock);
    return usched_wg_wait(&v->fibers); /* step 4 */
}

int srv_check(struct srv *v, char *msg, size_t len)
{
    msg[0] = '\0';
    return v->proto->check ? v->proto->check(v->state, msg, len) : 0;
}

void srv_free(struct srv *v)
{
    if (!v) return;
    if (v->proto->fini && v->state) v->proto->fini(v->state);
    usched_wg_destroy(&v->fibers);
    usched_mutex_destroy(&v->lock);
    if (v->spare_fd >= 0) close(v->spare_fd);
    free(v->conns);
    free(v);
}
