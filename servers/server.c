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
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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

int srv_conn_init(struct srv_conn *c, int fd, size_t in_max)
{
    memset(c, 0, sizeof *c);
    c->fd = fd;
    c->in_max = in_max;
    c->in_cap = in_max < CONN_IN_INITIAL ? in_max : CONN_IN_INITIAL;
    c->in = malloc(c->in_cap);
    c->out_cap = CONN_OUT_INITIAL;
    c->out = malloc(c->out_cap);
    if (!c->in || !c->out) {
        srv_conn_free(c);
        return -ENOMEM;
    }
    return 0;
}

void srv_conn_free(struct srv_conn *c)
{
    free(c->in);
    free(c->out);
    c->in = c->out = NULL;
}

void srv_put(struct srv_conn *c, const void *p, size_t n)
{
    if (c->out_failed) return;
    if (c->out_len + n > c->out_cap) {
        size_t cap = c->out_cap * 2;
        while (cap < c->out_len + n) cap *= 2;
        char *nb = realloc(c->out, cap);
        if (!nb) {
            c->out_failed = true;
            return;
        }
        c->out = nb;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
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
    char *big = malloc((size_t)n + 1);
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

int srv_flush(struct srv_conn *c)
{
    if (c->out_failed) return -ENOMEM;
    if (c->out_len == 0 || c->fd < 0) return 0;
    ssize_t w = usched_write(c->fd, c->out, c->out_len, USCHED_FOREVER);
    if (w < 0) return (int)w;
    if ((size_t)w != c->out_len) return -EPIPE; /* stopped part-way: the peer is gone */
    c->out_len = 0;
    return 0;
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
    char *nb = realloc(c->in, cap);
    if (!nb) return -ENOMEM;
    c->in = nb;
    c->in_cap = cap;
    return 0;
}

ssize_t srv_fill(struct srv_conn *c)
{
    int e = in_room(c);
    if (e < 0) return e;
    ssize_t r = usched_read(c->fd, c->in + c->in_end, c->in_cap - c->in_end, USCHED_FOREVER);
    if (r > 0) c->in_end += (size_t)r;
    return r;
}

/* Handles every complete request pending in c->in. Returns the last step's
 * verdict (0: waiting for more input). */
static ssize_t run_steps(struct srv_conn *c, srv_step_fn *step, void *st)
{
    while (c->in_start < c->in_end) {
        ssize_t k = step(st, c, c->in + c->in_start, c->in_end - c->in_start);
        if (k <= 0) return k;
        c->in_start += (size_t)k;
        if (c->out_failed) return -ENOMEM;
    }
    return 0;
}

void srv_conn_run(struct srv_conn *c, srv_step_fn *step, void *st)
{
    for (;;) {
        ssize_t k = run_steps(c, step, st);
        if (srv_flush(c) < 0 || k < 0) return;
        if (srv_fill(c) <= 0) return; /* end of file, error, or a request over in_max */
    }
}

ssize_t srv_conn_feed(struct srv_conn *c, srv_step_fn *step, void *st, const void *in, size_t n)
{
    const char *p = in;
    while (n > 0) {
        int e = in_room(c);
        if (e < 0) return e;
        size_t take = c->in_cap - c->in_end < n ? c->in_cap - c->in_end : n;
        memcpy(c->in + c->in_end, p, take);
        c->in_end += take;
        p += take;
        n -= take;
        ssize_t k = run_steps(c, step, st);
        if (k < 0) return k;
    }
    return 0;
}

/* ---- the server ------------------------------------------------------------------ */

struct srv {
    const struct srv_proto *proto;
    void *state;
    usched_t *sched;
    int lfd;
    bool closed; /* srv_stop closed lfd (the stopping thread only) */
    int port;
    atomic_bool stopping; /* any thread; release store in srv_stop, acquire loads */
    usched_wg_t fibers;   /* accept fiber + connection fibers still running */
    usched_mutex_t lock;  /* guards conns */
    int *conns;           /* open connection fds (lock) */
    size_t nconns, cap_conns;
    atomic_uint_fast64_t requests, accepted; /* relaxed counters */
};

struct conn_arg {
    struct srv *v;
    int fd;
};

/* Adds fd to the table; false when the server is stopping (step 3). */
static bool conn_register(struct srv *v, int fd)
{
    bool ok = false;
    usched_mutex_lock(&v->lock);
    if (!atomic_load_explicit(&v->stopping, memory_order_acquire)) {
        if (v->nconns == v->cap_conns) {
            size_t cap = v->cap_conns ? v->cap_conns * 2 : 64;
            int *nc = realloc(v->conns, cap * sizeof *nc);
            if (nc) {
                v->conns = nc;
                v->cap_conns = cap;
            }
        }
        if (v->nconns < v->cap_conns) {
            v->conns[v->nconns++] = fd;
            ok = true;
        }
    }
    usched_mutex_unlock(&v->lock);
    return ok;
}

static void conn_unregister(struct srv *v, int fd)
{
    usched_mutex_lock(&v->lock);
    for (size_t i = 0; i < v->nconns; i++)
        if (v->conns[i] == fd) {
            v->conns[i] = v->conns[--v->nconns];
            break;
        }
    usched_mutex_unlock(&v->lock);
}

static void conn_fiber(void *arg)
{
    struct conn_arg *a = arg;
    struct srv *v = a->v;
    int fd = a->fd;
    free(a);
    struct srv_conn c;
    if (srv_conn_init(&c, fd, v->proto->in_max) == 0) {
        v->proto->conn(v->state, &c);
        atomic_fetch_add_explicit(&v->requests, c.requests, memory_order_relaxed);
        srv_conn_free(&c);
    }
    conn_unregister(v, fd);
    usched_close(fd);
    usched_wg_done(&v->fibers);
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
                /* out of descriptors or memory: let connections finish, then retry */
                usched_sleep_ns(10 * 1000 * 1000);
                continue;
            }
            fprintf(stderr, "usched serve %s: accept: %s; no longer accepting\n", v->proto->name,
                    usched_strerror(fd));
            break;
        }
        atomic_fetch_add_explicit(&v->accepted, 1, memory_order_relaxed);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* fails harmlessly off TCP */
        struct conn_arg *a = malloc(sizeof *a);
        if (!a || !conn_register(v, fd)) {
            free(a);
            usched_close(fd);
            continue;
        }
        a->v = v;
        a->fd = fd;
        usched_wg_add(&v->fibers, 1);
        int r = usched_spawn(usched_self(), NULL, conn_fiber, a);
        if (r < 0) {
            usched_wg_done(&v->fibers);
            conn_unregister(v, fd);
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
    struct srv *v = calloc(1, sizeof *v);
    if (!v) {
        snprintf(err, len, "out of memory");
        return -ENOMEM;
    }
    v->proto = p;
    v->sched = s;
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
    free(v->conns);
    free(v);
}
