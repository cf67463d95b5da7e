/*
 * Network servers on usched: one fiber per connection, written as plain
 * blocking code against the usched I/O calls (usched_read, usched_write,
 * usched_accept, ...). While a fiber waits for its socket, its CPU runs the
 * other connections' fibers.
 *
 * Each protocol is two files: <proto>_proto.c, the wire format as pure
 * functions over byte buffers (no I/O, unit-tested with well-formed and
 * garbage input), and <proto>.c, the server (its state and the per-request
 * work). server.c holds what they share: the listener with its accept fiber,
 * the connection buffers, and the stop protocol. `usched serve PROTOCOL`
 * (tools/usched/cmd_serve.c) runs one of them; docs/servers.md describes
 * them for users.
 */
#ifndef USCHED_SERVERS_H
#define USCHED_SERVERS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "usched.h"

/* ---- the protocols ----------------------------------------------------------- */

/* The protocols; each <name>.c defines `const struct srv_proto srv_proto_<name>`. */
#define SRV_PROTOCOLS(X) X(tbench) X(pgbench) X(redis) X(http) X(echo)

/* Options of a server; zero means the default. */
struct srv_opts {
    const char *host; /* numeric address to bind, default 127.0.0.1 */
    int port;         /* -1: the protocol's default, 0: any free port */
    int scale;        /* pgbench: scale factor of the tables (default 1) */
    unsigned flags;   /* reserved, 0 */
    /* Unsent output, in bytes, at which a connection stops reading and
     * parsing until the output has gone (default SRV_MAX_OUTPUT). A single
     * reply piece may take it past the bound by its own size (a tbench reply,
     * a redis bulk string: at most 1 MiB). */
    size_t max_output;
    /* Milliseconds a connection may go without completing a request (idle,
     * or sending one too slowly), or a write may wait for the peer to read,
     * before the server closes it. Default SRV_IDLE_TIMEOUT_MS; < 0: never. */
    long idle_timeout_ms;
    /* Connections served at once (default SRV_MAX_CONNS). One more is
     * refused with the protocol's own error, where it has one, then closed. */
    int max_conns;
};

#define SRV_MAX_OUTPUT (256 << 10)
#define SRV_IDLE_TIMEOUT_MS 300000L
#define SRV_MAX_CONNS 10000

struct srv_conn;
/* One step of a request/response protocol, given the pending input in[0, n):
 *   > 0  a request of that many bytes was handled (its reply appended);
 *     0  no complete request yet;
 *   < 0  the connection must end (a reply saying why may be appended). */
typedef ssize_t srv_step_fn(void *conn_state, struct srv_conn *c, const char *in, size_t n);

/* One protocol. Every function but conn runs on the caller's thread. */
struct srv_proto {
    const char *name;
    int default_port;
    const char *summary;
    size_t in_max; /* the largest request, in bytes: a connection buffers at most this */
    /* The step run on a connection over max_conns: appends the protocol's
     * "too many connections" error (after reading what the protocol sends
     * first, for PostgreSQL the startup packet) and returns < 0. NULL: such
     * a connection is closed without a word. */
    srv_step_fn *refuse;
    /* Builds the shared state (tables, keyspace). 0, or -1 with err set. */
    int (*init)(const struct srv_opts *o, void **state, char *err, size_t len);
    /* Serves one connection, in the connection's own fiber, until the peer
     * leaves, sends garbage or the server stops. The caller closes the fd. */
    void (*conn)(void *state, struct srv_conn *c);
    /* After stop: 0 if the state is consistent, else -1 with msg saying what
     * is wrong; msg also gets a one-line summary on success. NULL: nothing
     * to check. */
    int (*check)(void *state, char *msg, size_t len);
    void (*fini)(void *state);
};

const struct srv_proto *srv_proto_find(const char *name);
extern const struct srv_proto *const srv_protos[];
extern const int srv_nprotos;

/* ---- a running server ------------------------------------------------------------ */

struct srv;

/* Binds host:port and spawns the accept fiber on the started scheduler s.
 * 0, or a negative errno with err naming what failed (for instance
 * "bind 127.0.0.1:7003: Address already in use"). */
int srv_start(usched_t *s, const struct srv_proto *p, const struct srv_opts *o, struct srv **out,
              char *err, size_t len);
/* The port actually bound (the ephemeral one for port 0). */
int srv_port(const struct srv *v);
/* Requests served by the connections that have ended (so, after srv_stop,
 * by all of them). */
uint64_t srv_requests(const struct srv *v);
/* Connections accepted so far. */
uint64_t srv_connections(const struct srv *v);

/* What a server has done; the high-water marks cover the connections that
 * have ended (so, after srv_stop, all of them). */
struct srv_stats {
    uint64_t connections; /* accepted, refused ones included */
    uint64_t requests;    /* served by the connections that have ended */
    uint64_t refused;     /* over max_conns, or accepted while out of descriptors */
    uint64_t timed_out;   /* closed by the idle timeout */
    uint64_t failed;      /* ended for lack of memory */
    uint64_t open;        /* open now, refused ones included */
    size_t buffers;       /* buffer memory of the open connections now, bytes */
    size_t out_hwm;       /* the most unsent output one connection held, bytes */
    size_t buf_hwm;       /* the most buffer memory (input + output) one connection held */
};
void srv_stats(const struct srv *v, struct srv_stats *st);
/* Stops accepting, ends every connection (a fiber blocked in a read sees
 * end of file), and waits until every fiber of the server has returned.
 * From an outside thread or a fiber that is not the server's. */
int srv_stop(struct srv *v);
/* The protocol's check (see struct srv_proto), after srv_stop. */
int srv_check(struct srv *v, char *msg, size_t len);
/* Frees a stopped server. */
void srv_free(struct srv *v);

/* ---- connections ---------------------------------------------------------------- */

/* Output that stays where it is until sent (srv_put_ref): `n` bytes at `p`,
 * sent after the first `at` bytes of out. */
struct srv_ref {
    size_t at;
    const char *p;
    size_t n;
};
#define SRV_REFS 8          /* references a connection holds before it copies */
#define SRV_REF_MIN 512     /* a smaller piece is copied: cheaper than a piece of the gather */

/* A connection's buffers. Bytes received and not yet parsed are
 * in[in_start, in_end); replies not yet sent are out[0, out_len), with the
 * references refs[0, nrefs) between its bytes. A protocol appends replies
 * with srv_put (or srv_put_ref) and they go out in one write when the
 * connection runs out of complete requests (or out_max bytes are waiting),
 * so a pipelining client gets its replies in batches. */
struct srv_conn {
    int fd;              /* -1 in unit tests: srv_flush keeps the bytes (drops them with out_max set) */
    char *in;
    size_t in_start, in_end, in_cap;
    size_t in_max;       /* a request that does not fit in this many bytes is refused */
    char *out;
    size_t out_len, out_cap;
    struct srv_ref refs[SRV_REFS];
    int nrefs;
    size_t ref_len;      /* the references' bytes: unsent output is out_len + ref_len */
    size_t out_max;      /* unsent output at which reading stops; 0: no bound (tests) */
    bool out_failed;     /* srv_put ran out of memory, or srv_drain failed: the connection ends */
    bool timed_out;      /* the idle timeout ended it */
    uint64_t idle_ns;    /* the idle timeout; 0: none */
    uint64_t deadline;   /* CLOCK_MONOTONIC ns by which the next request must be complete; 0: none */
    size_t out_hwm;      /* the most unsent output held */
    size_t buf_hwm;      /* the most buffer memory held (in_cap + out_cap) */
    atomic_size_t *buf_total; /* the server's sum of in_cap + out_cap, kept current; NULL in tests */
    size_t buf_counted;       /* this connection's share of *buf_total */
    uint64_t requests;   /* counted by the protocol, summed by the server */
};

/* Initialises c for fd with an input limit of in_max bytes. 0 or -ENOMEM. */
int srv_conn_init(struct srv_conn *c, int fd, size_t in_max);
void srv_conn_free(struct srv_conn *c);

/* Appends n bytes to the output. */
void srv_put(struct srv_conn *c, const void *p, size_t n);
/* Appends n bytes at p that stay there, unchanged, until the connection's
 * next flush (a constant, such as a body of zeros): sent from where they
 * are, in one gathered write with the rest. A piece under SRV_REF_MIN
 * bytes, one past SRV_REFS references, or any in a unit test (fd -1, whose
 * test reads out) is copied as srv_put copies. */
void srv_put_ref(struct srv_conn *c, const void *p, size_t n);
/* Output not yet sent, in bytes. */
static inline size_t srv_pending(const struct srv_conn *c)
{
    return c->out_len + c->ref_len;
}
/* Appends a string. */
void srv_puts(struct srv_conn *c, const char *s);
/* Appends printf-style text. */
void srv_printf(struct srv_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sends the pending output. 0, or a negative errno. */
int srv_flush(struct srv_conn *c);
/* Sends the pending output if it has reached out_max: for a step whose
 * reply is long (many keys, many statements), between its pieces, with no
 * lock held. On failure it sets out_failed, so the connection ends after
 * the step. 0, or a negative errno. */
int srv_drain(struct srv_conn *c);
/* Receives more input (one read of as much as fits). Bytes read, 0 at end
 * of file, -EMSGSIZE when in_max bytes are pending without a complete
 * request, -ETIMEDOUT past the deadline (timed_out set), or a negative errno. */
ssize_t srv_fill(struct srv_conn *c);

/* The connection loop of every server here: handle the complete requests
 * in the input, send the replies in one write, read more, repeat; until
 * the peer leaves, a step refuses the input, the idle timeout passes or the
 * server stops. Once out_max bytes of output are pending it stops parsing,
 * sends them, and only then goes on, so a client that pipelines without
 * reading holds at most out_max (plus one reply piece) of the server's
 * memory. Buffers grown for a large request shrink back after it. */
void srv_conn_run(struct srv_conn *c, srv_step_fn *step, void *conn_state);

/* The same loop without I/O, for tests: feeds n bytes through step and
 * leaves the replies in c->out. Returns the last step's verdict: 0 when all
 * input was consumed or is incomplete, < 0 when a step refused it. */
ssize_t srv_conn_feed(struct srv_conn *c, srv_step_fn *step, void *conn_state, const void *in, size_t n);

/* Big-endian integers of the wire formats. */
static inline uint32_t srv_be32(const void *p)
{
    const unsigned char *b = p;
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}
static inline void srv_put_be32(void *p, uint32_t v)
{
    unsigned char *b = p;
    b[0] = (unsigned char)(v >> 24);
    b[1] = (unsigned char)(v >> 16);
    b[2] = (unsigned char)(v >> 8);
    b[3] = (unsigned char)v;
}

#endif
