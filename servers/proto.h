/*
 * The wire formats of the servers, as pure functions over byte buffers: no
 * I/O, no shared state, so they can be read on their own and tested with
 * any input. A parser returns the bytes of one complete message (> 0), 0
 * when the message is not complete yet, or a negative errno when the input
 * can never become a valid message (-EPROTO malformed, -EMSGSIZE too big).
 */
#ifndef USCHED_SERVERS_PROTO_H
#define USCHED_SERVERS_PROTO_H

#include "servers.h"

/* ---- tbench (tbench_proto.c) ------------------------------------------------------ */

#define TBENCH_MAX_FRAME 70000 /* tbench_srv refuses a length + 4 at or above this */

struct tbench_req {
    uint32_t reply_len; /* bytes of the reply's body */
};
ssize_t tbench_parse(const char *in, size_t n, struct tbench_req *r);
/* tbench.c, for tests: feeds bytes through the server's request loop. */
ssize_t tbench_feed(struct srv_conn *c, const void *in, size_t n);

/* ---- PostgreSQL v3 (pgbench_proto.c) ------------------------------------------------ */

#define PG_MAX_STARTUP 10000    /* as PostgreSQL's MAX_STARTUP_PACKET_LENGTH */
#define PG_MAX_MESSAGE (1 << 20) /* a query longer than 1 MiB is refused */
#define PG_PROTOCOL_3 196608     /* 3.0 */
#define PG_SSL_REQUEST 80877103
#define PG_GSSENC_REQUEST 80877104
#define PG_CANCEL_REQUEST 80877102

/* The first message of a connection (it has no type byte). */
struct pg_startup {
    uint32_t code;       /* PG_PROTOCOL_3 or another version, or a request code */
    const char *user;    /* in the input buffer; NULL if absent */
    const char *database;
};
ssize_t pg_parse_startup(const char *in, size_t n, struct pg_startup *s);

/* Every later message: a type byte and a body. */
struct pg_msg {
    char type;
    const char *body; /* in the input buffer */
    size_t len;
};
ssize_t pg_parse_msg(const char *in, size_t n, struct pg_msg *m);

/* Replies (appended to c's output). */
void pg_put_auth_ok(struct srv_conn *c);
void pg_put_param(struct srv_conn *c, const char *name, const char *value);
void pg_put_key_data(struct srv_conn *c, uint32_t pid, uint32_t key);
void pg_put_ready(struct srv_conn *c, char status); /* 'I' idle, 'T' in a transaction, 'E' failed */
/* A row description: ncols names, type oids and sizes. */
void pg_put_row_desc(struct srv_conn *c, int ncols, const char *const *names, const uint32_t *oids,
                     const int16_t *sizes);
/* A data row in text format; a NULL value is SQL NULL. */
void pg_put_data_row(struct srv_conn *c, int ncols, const char *const *values);
void pg_put_complete(struct srv_conn *c, const char *tag);
void pg_put_empty_query(struct srv_conn *c);
void pg_put_error(struct srv_conn *c, const char *severity, const char *sqlstate, const char *msg);

/* SQL tokens, enough to recognise statements whatever their spacing and
 * case. '-' directly before a digit belongs to the number. */
enum pg_tok_kind { PG_TOK_END, PG_TOK_WORD, PG_TOK_INT, PG_TOK_STR, PG_TOK_PUNCT, PG_TOK_BAD };
struct pg_tok {
    enum pg_tok_kind kind;
    const char *s;
    size_t n;
    int64_t v; /* PG_TOK_INT */
};
/* Reads the token at p (before end); returns where the next one starts. */
const char *pg_sql_token(const char *p, const char *end, struct pg_tok *t);
/* Whether the statement [q, q + n) matches pattern, where '?' stands for an
 * integer (stored in args, at most maxargs) and a trailing "..." matches
 * anything. Words compare without case, spacing is free. Returns the
 * number of integers, or -1 for no match. */
int pg_sql_match(const char *q, size_t n, const char *pattern, int64_t *args, int maxargs);

/* pgbench.c, for tests: a connection's session over a table set. */
struct pgdb;
struct pg_session;
int pgdb_create(int scale, struct pgdb **out, char *err, size_t len);
void pgdb_free(struct pgdb *db);
/* 0 when the balances agree (msg: a summary), -1 otherwise (msg: how). */
int pgdb_check(struct pgdb *db, char *msg, size_t len);
struct pg_session *pg_session_new(struct pgdb *db);
/* Ends the session: an open transaction is rolled back. */
void pg_session_free(struct pg_session *s);
ssize_t pg_feed(struct pg_session *s, struct srv_conn *c, const void *in, size_t n);

/* ---- RESP2 (redis_proto.c) ------------------------------------------------------------ */

#define RESP_MAX_ARGS 1024
#define RESP_MAX_BULK (1 << 20)   /* a longer argument is refused */
#define RESP_MAX_INLINE (64 << 10) /* as redis's PROTO_INLINE_MAX_SIZE */

struct resp_cmd {
    int argc; /* 0 for an empty line or *0 (nothing to do) */
    const char *argv[RESP_MAX_ARGS]; /* in the input buffer, not terminated */
    size_t len[RESP_MAX_ARGS];
};
/* On -EPROTO or -EMSGSIZE, *why says what was wrong, in redis's words. */
ssize_t resp_parse(const char *in, size_t n, struct resp_cmd *cmd, const char **why);

void resp_put_simple(struct srv_conn *c, const char *s); /* +s */
void resp_put_error(struct srv_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void resp_put_int(struct srv_conn *c, long long v);
void resp_put_bulk(struct srv_conn *c, const char *p, size_t n);
void resp_put_nil(struct srv_conn *c);
void resp_put_array(struct srv_conn *c, long long n);

/* redis.c, for tests. */
struct rdb;
/* SipHash-1-3 of data under a 128-bit key: the keyspace's hash. */
uint64_t rdb_siphash13(const uint64_t key[2], const void *data, size_t n);
/* Entries in the fullest hash chain of the keyspace. */
size_t rdb_longest_chain(struct rdb *db);
int rdb_create(struct rdb **out);
void rdb_free(struct rdb *db);
ssize_t redis_feed(struct rdb *db, struct srv_conn *c, const void *in, size_t n);

/* ---- HTTP/1.1 (http_proto.c) ----------------------------------------------------------- */

#define HTTP_MAX_HEAD 8192  /* request line and headers */
#define HTTP_MAX_BODY 65536 /* a request body is read and discarded */
#define HTTP_MAX_HEADERS 100

struct http_req {
    const char *method, *target; /* in the input buffer, not terminated */
    size_t method_len, target_len;
    int minor;        /* HTTP/1.minor */
    bool keep_alive;  /* after the Connection header and the version */
    size_t head_len, body_len;
    int status;       /* when the parse fails: the status to answer (400, 413, ...) */
};
/* Returns head + body bytes, 0 if incomplete, or -EPROTO with r->status
 * set to the error status to answer before closing. */
ssize_t http_parse(const char *in, size_t n, struct http_req *r);
const char *http_reason(int status);

/* http.c, for tests. */
ssize_t http_feed(struct srv_conn *c, const void *in, size_t n);

/* echo.c, for tests. */
ssize_t echo_feed(struct srv_conn *c, const void *in, size_t n);

#endif
