/*
 * The servers' wire formats and request handling without sockets: bytes
 * are fed through each server's request loop (srv_conn_feed) and the
 * replies it queued are checked, for well-formed requests as the real
 * clients send them, split at every byte, and for garbage.
 *
 *   test_servers_proto [tbench|pgbench|redis|http|echo|garbage|pg_overflow|
 *                       redis_hash|output_bound|gather]   (default: all)
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto.h"
#include "test.h"

/* A fresh connection without a socket, sized as the protocol's. */
static struct srv_conn conn(const char *proto)
{
    struct srv_conn c;
    ASSERT_OK(srv_conn_init(&c, -1, srv_proto_find(proto)->in_max));
    return c;
}

static void out_reset(struct srv_conn *c)
{
    c->out_len = 0;
}

/* The output as a string (replies of the text protocols). */
static const char *out_str(struct srv_conn *c)
{
    srv_put(c, "", 1);
    c->out_len--;
    return c->out;
}

/* ---- tbench -------------------------------------------------------------------------- */

static size_t tbench_request(char *buf, uint32_t send, uint32_t recv)
{
    srv_put_be32(buf, send - 4);
    srv_put_be32(buf + 4, recv - 4);
    memset(buf + 8, 'x', send - 8);
    return send;
}

static void test_tbench(void)
{
    struct srv_conn c = conn("tbench");
    static char req[70000];
    /* the handshake: 8 bytes each way */
    size_t n = tbench_request(req, 8, 8);
    ASSERT_EQ(tbench_feed(&c, req, n), 0);
    ASSERT_EQ(c.out_len, 8);
    ASSERT_EQ(srv_be32(c.out), 4);
    /* the sizes of the load file, whole and one byte at a time */
    static const uint32_t sizes[][2] = {{59, 4155}, {47, 39}, {59, 61499}, {65595, 55}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        out_reset(&c);
        n = tbench_request(req, sizes[i][0], sizes[i][1]);
        ASSERT_EQ(tbench_feed(&c, req, n), 0);
        ASSERT_EQ(c.out_len, sizes[i][1]);
        ASSERT_EQ(srv_be32(c.out), sizes[i][1] - 4);
        out_reset(&c);
        for (size_t k = 0; k < n; k++) ASSERT_EQ(tbench_feed(&c, req + k, 1), 0);
        ASSERT_EQ(c.out_len, sizes[i][1]);
    }
    ASSERT_EQ(c.requests, 9);
    /* two requests in one segment get two replies */
    out_reset(&c);
    n = tbench_request(req, 47, 39);
    n += tbench_request(req + n, 59, 71);
    ASSERT_EQ(tbench_feed(&c, req, n), 0);
    ASSERT_EQ(c.out_len, 39 + 71);
    /* lengths below the reply word, at the limit, and a reply too big */
    char bad[8];
    srv_put_be32(bad, 2);
    ASSERT_EQ(tbench_feed(&c, bad, 4), -EPROTO);
    srv_conn_free(&c);
    c = conn("tbench");
    srv_put_be32(bad, 69996);
    ASSERT_EQ(tbench_feed(&c, bad, 4), -EPROTO);
    srv_conn_free(&c);
    c = conn("tbench");
    srv_put_be32(bad, 4);
    srv_put_be32(bad + 4, 70000);
    ASSERT_EQ(tbench_feed(&c, bad, 8), -EPROTO);
    srv_conn_free(&c);
}

/* ---- pgbench ---------------------------------------------------------------------------- */

/* The types of the messages in c's output ("RSSKZ"), and the last
 * ReadyForQuery status, the first DataRow's first value and the first
 * error's SQLSTATE. */
struct pg_reply {
    char types[256];
    char status;
    char value[64];
    char sqlstate[8];
    char tag[64];
};

static struct pg_reply pg_reply(struct srv_conn *c)
{
    struct pg_reply r = {0};
    size_t i = 0, k = 0;
    while (i < c->out_len) {
        ASSERT(c->out_len - i >= 5);
        char type = c->out[i];
        uint32_t len = srv_be32(c->out + i + 1);
        ASSERT(len >= 4 && i + 1 + len <= c->out_len);
        const char *body = c->out + i + 5;
        if (k < sizeof r.types - 1) r.types[k++] = type;
        if (type == 'Z') r.status = body[0];
        if (type == 'D' && !r.value[0]) {
            uint32_t vl = srv_be32(body + 2);
            if (vl == UINT32_MAX)
                snprintf(r.value, sizeof r.value, "NULL");
            else
                snprintf(r.value, sizeof r.value, "%.*s", (int)vl, body + 6);
        }
        if (type == 'C') snprintf(r.tag, sizeof r.tag, "%s", body);
        if (type == 'E' && !r.sqlstate[0])
            for (const char *f = body; *f; f += strlen(f) + 1)
                if (*f == 'C') snprintf(r.sqlstate, sizeof r.sqlstate, "%s", f + 1);
        i += 1 + len;
    }
    out_reset(c);
    return r;
}

static size_t pg_query_msg(char *buf, const char *sql)
{
    size_t n = strlen(sql) + 1;
    buf[0] = 'Q';
    srv_put_be32(buf + 1, (uint32_t)(n + 4));
    memcpy(buf + 5, sql, n);
    return n + 5;
}

static struct pg_reply pg_query(struct pg_session *s, struct srv_conn *c, const char *sql)
{
    char buf[1024];
    size_t n = pg_query_msg(buf, sql);
    ASSERT_EQ(pg_feed(s, c, buf, n), 0);
    return pg_reply(c);
}

static size_t pg_startup_msg(char *buf)
{
    static const char params[] = "user\0bench\0database\0bench\0application_name\0pgbench\0";
    size_t n = 8 + sizeof params; /* params plus the final empty name */
    srv_put_be32(buf, (uint32_t)n);
    srv_put_be32(buf + 4, PG_PROTOCOL_3);
    memcpy(buf + 8, params, sizeof params);
    return n;
}

static struct pg_session *pg_connect(struct pgdb *db, struct srv_conn *c)
{
    struct pg_session *s = pg_session_new(db);
    ASSERT(s);
    char buf[256];
    srv_put_be32(buf, 8);
    srv_put_be32(buf + 4, PG_SSL_REQUEST);
    ASSERT_EQ(pg_feed(s, c, buf, 8), 0);
    ASSERT_EQ(c->out_len, 1);
    ASSERT_EQ(c->out[0], 'N');
    out_reset(c);
    size_t n = pg_startup_msg(buf);
    for (size_t k = 0; k < n; k++) ASSERT_EQ(pg_feed(s, c, buf + k, 1), 0); /* byte by byte */
    struct pg_reply r = pg_reply(c);
    ASSERT_EQ(r.types[0], 'R');
    ASSERT_STR_CONTAINS(r.types, "K");
    ASSERT_EQ(r.status, 'I');
    return s;
}

static void pg_tpcb(struct pg_session *s, struct srv_conn *c, int aid, int tid, int bid, int delta, bool commit)
{
    char q[256];
    ASSERT_STR_EQ(pg_query(s, c, "BEGIN;").tag, "BEGIN");
    snprintf(q, sizeof q, "UPDATE pgbench_accounts SET abalance = abalance + %d WHERE aid = %d;", delta, aid);
    struct pg_reply r = pg_query(s, c, q);
    ASSERT_STR_EQ(r.tag, "UPDATE 1");
    ASSERT_EQ(r.status, 'T');
    snprintf(q, sizeof q, "SELECT abalance FROM pgbench_accounts WHERE aid = %d;", aid);
    ASSERT_STR_EQ(pg_query(s, c, q).types, "TDCZ");
    snprintf(q, sizeof q, "UPDATE pgbench_tellers SET tbalance = tbalance + %d WHERE tid = %d;", delta, tid);
    ASSERT_STR_EQ(pg_query(s, c, q).tag, "UPDATE 1");
    snprintf(q, sizeof q, "UPDATE pgbench_branches SET bbalance = bbalance + %d WHERE bid = %d;", delta, bid);
    ASSERT_STR_EQ(pg_query(s, c, q).tag, "UPDATE 1");
    snprintf(q, sizeof q,
             "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (%d, %d, %d, %d, CURRENT_TIMESTAMP);",
             tid, bid, aid, delta);
    ASSERT_STR_EQ(pg_query(s, c, q).tag, "INSERT 0 1");
    if (commit) {
        r = pg_query(s, c, "END;");
        ASSERT_STR_EQ(r.tag, "COMMIT");
        ASSERT_EQ(r.status, 'I');
    }
}

static int sql_match(const char *q, const char *pattern, int64_t *args, int max)
{
    return pg_sql_match(q, strlen(q), pattern, args, max);
}

static void test_pgbench(void)
{
    struct pgdb *db;
    char err[200], msg[200];
    ASSERT_EQ(pgdb_create(0, &db, err, sizeof err), -EINVAL);
    ASSERT_STR_CONTAINS(err, "scale 0");
    ASSERT_OK(pgdb_create(2, &db, err, sizeof err));
    struct srv_conn c = conn("pgbench");
    struct pg_session *s = pg_connect(db, &c);

    /* what pgbench asks before a run */
    struct pg_reply r = pg_query(s, &c, "select count(*) from pgbench_branches");
    ASSERT_STR_EQ(r.types, "TDCZ");
    ASSERT_STR_EQ(r.value, "2");
    r = pg_query(s, &c,
                 "select o.n, p.partstrat, pg_catalog.count(i.inhparent) from pg_catalog.pg_class as c "
                 "join pg_catalog.pg_namespace as n on (n.oid = c.relnamespace) where c.relname = "
                 "'pgbench_accounts' and o.n is not null group by 1, 2 order by 1 asc limit 1");
    ASSERT_STR_EQ(r.types, "TDCZ");
    /* -S: any spacing and case */
    r = pg_query(s, &c, "SELECT abalance FROM pgbench_accounts WHERE aid = 200000;");
    ASSERT_STR_EQ(r.types, "TDCZ");
    ASSERT_STR_EQ(r.value, "0");
    r = pg_query(s, &c, "  select\tABALANCE from pgbench_accounts where aid=7 ; ");
    ASSERT_STR_EQ(r.types, "TDCZ");
    r = pg_query(s, &c, "SELECT abalance FROM pgbench_accounts WHERE aid = 200001;"); /* no such row */
    ASSERT_STR_EQ(r.types, "TCZ");
    ASSERT_STR_EQ(r.tag, "SELECT 0");

    /* tpcb-like: committed, then one rolled back, then one lost with the connection */
    pg_tpcb(s, &c, 17, 3, 1, -4321, true);
    pg_tpcb(s, &c, 17, 3, 1, 99, true);
    r = pg_query(s, &c, "SELECT abalance FROM pgbench_accounts WHERE aid = 17;");
    ASSERT_STR_EQ(r.value, "-4222");
    pg_tpcb(s, &c, 18, 4, 2, 5000, false);
    ASSERT_STR_EQ(pg_query(s, &c, "ROLLBACK;").tag, "ROLLBACK");
    pg_tpcb(s, &c, 19, 5, 2, 777, false);
    pg_session_free(s);
    ASSERT_OK(pgdb_check(db, msg, sizeof msg));
    ASSERT_STR_CONTAINS(msg, "-4222 over 2 history rows");

    /* a new connection sees the committed state, through the same SELECTs psql would run */
    s = pg_connect(db, &c);
    ASSERT_STR_EQ(pg_query(s, &c, "select sum(abalance) from pgbench_accounts").value, "-4222");
    ASSERT_STR_EQ(pg_query(s, &c, "select sum(delta) from pgbench_history").value, "-4222");
    ASSERT_STR_EQ(pg_query(s, &c, "select count(*) from pgbench_history").value, "2");
    ASSERT_STR_EQ(pg_query(s, &c, "select sum(bbalance) from pgbench_branches;select 1").value, "-4222");

    /* errors: unknown statement, then a failed transaction until its end */
    r = pg_query(s, &c, "DROP TABLE pgbench_accounts");
    ASSERT_STR_EQ(r.types, "EZ");
    ASSERT_STR_EQ(r.sqlstate, "42601");
    ASSERT_EQ(r.status, 'I');
    pg_query(s, &c, "BEGIN");
    pg_query(s, &c, "UPDATE pgbench_accounts SET abalance = abalance + 5 WHERE aid = 1");
    r = pg_query(s, &c, "VACUUM pgbench_branches");
    ASSERT_EQ(r.status, 'E');
    r = pg_query(s, &c, "SELECT abalance FROM pgbench_accounts WHERE aid = 1");
    ASSERT_STR_EQ(r.sqlstate, "25P02");
    r = pg_query(s, &c, "END");
    ASSERT_STR_EQ(r.tag, "ROLLBACK");
    ASSERT_EQ(r.status, 'I');
    ASSERT_STR_EQ(pg_query(s, &c, "SELECT abalance FROM pgbench_accounts WHERE aid = 1").value, "0");
    ASSERT_STR_EQ(pg_query(s, &c, " ; ").types, "IZ"); /* empty query */

    /* the extended protocol is refused once per batch, and Sync recovers */
    char buf[64] = {'P', 0, 0, 0, 4, 'B', 0, 0, 0, 4, 'S', 0, 0, 0, 4};
    ASSERT_EQ(pg_feed(s, &c, buf, 15), 0);
    r = pg_reply(&c);
    ASSERT_STR_EQ(r.types, "EZ");
    ASSERT_STR_EQ(r.sqlstate, "0A000");
    /* a query string without its terminator, an unknown message, Terminate */
    buf[0] = 'Q';
    srv_put_be32(buf + 1, 7);
    memcpy(buf + 5, "abc", 3);
    ASSERT_EQ(pg_feed(s, &c, buf, 8), -EPROTO);
    pg_session_free(s);
    srv_conn_free(&c);
    c = conn("pgbench");
    s = pg_connect(db, &c);
    buf[0] = '!';
    srv_put_be32(buf + 1, 4);
    ASSERT_EQ(pg_feed(s, &c, buf, 5), -EPROTO);
    ASSERT_STR_EQ(pg_reply(&c).sqlstate, "08P01");
    pg_session_free(s);
    srv_conn_free(&c);
    c = conn("pgbench");
    s = pg_connect(db, &c);
    buf[0] = 'Q';
    srv_put_be32(buf + 1, PG_MAX_MESSAGE + 1);
    ASSERT_EQ(pg_feed(s, &c, buf, 5), -EMSGSIZE);
    pg_session_free(s);
    srv_conn_free(&c);
    /* startup packets: too short, too long, another protocol version */
    static const uint32_t bad_startup[][2] = {{4, PG_PROTOCOL_3}, {20000, PG_PROTOCOL_3}};
    for (size_t i = 0; i < 2; i++) {
        c = conn("pgbench");
        s = pg_session_new(db);
        srv_put_be32(buf, bad_startup[i][0]);
        srv_put_be32(buf + 4, bad_startup[i][1]);
        ASSERT_EQ(pg_feed(s, &c, buf, 8), -EPROTO);
        pg_session_free(s);
        srv_conn_free(&c);
    }
    c = conn("pgbench");
    s = pg_session_new(db);
    srv_put_be32(buf, 9);
    srv_put_be32(buf + 4, 2 << 16);
    buf[8] = 0;
    ASSERT_EQ(pg_feed(s, &c, buf, 9), -EPROTO);
    ASSERT_STR_EQ(pg_reply(&c).sqlstate, "0A000");
    pg_session_free(s);
    srv_conn_free(&c);
    /* name without a value */
    c = conn("pgbench");
    s = pg_session_new(db);
    srv_put_be32(buf, 13);
    srv_put_be32(buf + 4, PG_PROTOCOL_3);
    memcpy(buf + 8, "user\0", 5);
    ASSERT_EQ(pg_feed(s, &c, buf, 13), -EPROTO);
    pg_session_free(s);
    srv_conn_free(&c);

    ASSERT_OK(pgdb_check(db, msg, sizeof msg));
    pgdb_free(db);

    /* the statement matcher */
    int64_t a[4];
    ASSERT_EQ(sql_match("update t set x = x + -12 where id = 3", "update t set x = x + ? where id = ?", a, 4), 2);
    ASSERT_EQ(a[0], -12);
    ASSERT_EQ(a[1], 3);
    ASSERT_EQ(sql_match("where id = 99999999999999999999", "where id = ?", a, 4), -1);
    ASSERT_EQ(sql_match("where id = -9223372036854775808", "where id = ?", a, 4), 1); /* INT64_MIN */
    ASSERT_EQ(a[0], INT64_MIN);
    ASSERT_EQ(sql_match("where id = 9223372036854775808", "where id = ?", a, 4), -1);
    ASSERT_EQ(sql_match("where id = -9223372036854775809", "where id = ?", a, 4), -1);
    ASSERT_EQ(sql_match("where id = 'x'", "where id = ?", a, 4), -1);
    ASSERT_EQ(sql_match("where id = 1 or 1", "where id = ?", a, 4), -1);
    ASSERT_EQ(sql_match("where id = 1 -- note", "where id = ?", a, 4), 1);
    ASSERT_EQ(sql_match("select 'unterminated", "select ...", a, 4), 0);
}

/* ---- redis ----------------------------------------------------------------------------- */

static const char *redis(struct rdb *db, struct srv_conn *c, const char *in, ssize_t expect)
{
    out_reset(c);
    ASSERT_EQ(redis_feed(db, c, in, strlen(in)), expect);
    return out_str(c);
}

static void test_redis(void)
{
    struct rdb *db;
    ASSERT_OK(rdb_create(&db));
    struct srv_conn c = conn("redis");
    /* what redis-benchmark sends */
    ASSERT_STR_EQ(redis(db, &c, "*3\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n$4\r\nsave\r\n"
                                "*3\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n$10\r\nappendonly\r\n", 0),
                  "*2\r\n$4\r\nsave\r\n$0\r\n\r\n*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n");
    ASSERT_STR_EQ(redis(db, &c, "PING\r\n", 0), "+PONG\r\n");
    ASSERT_STR_EQ(redis(db, &c, "*1\r\n$4\r\nPING\r\n", 0), "+PONG\r\n");
    ASSERT_STR_EQ(redis(db, &c, "*2\r\n$3\r\nGET\r\n$16\r\nkey:__rand_int__\r\n", 0), "$-1\r\n");
    /* -P 16: sixteen SETs in one segment, sixteen replies in one batch */
    char pipe[2048] = "";
    for (int i = 0; i < 16; i++) strcat(pipe, "*3\r\n$3\r\nSET\r\n$16\r\nkey:__rand_int__\r\n$3\r\nxxx\r\n");
    char want[256] = "";
    for (int i = 0; i < 16; i++) strcat(want, "+OK\r\n");
    ASSERT_STR_EQ(redis(db, &c, pipe, 0), want);
    ASSERT_STR_EQ(redis(db, &c, "*2\r\n$3\r\nGET\r\n$16\r\nkey:__rand_int__\r\n", 0), "$3\r\nxxx\r\n");
    /* the same split at every byte */
    out_reset(&c);
    for (size_t i = 0; pipe[i]; i++) ASSERT_EQ(redis_feed(db, &c, pipe + i, 1), 0);
    ASSERT_STR_EQ(out_str(&c), want);
    ASSERT_STR_EQ(redis(db, &c, "INCR counter\r\nINCR counter\r\nDECR counter\r\n", 0), ":1\r\n:2\r\n:1\r\n");
    ASSERT_STR_EQ(redis(db, &c, "INCR key:__rand_int__\r\n", 0), "-ERR value is not an integer or out of range\r\n");
    ASSERT_STR_EQ(redis(db, &c, "SET big 9223372036854775807\r\nINCR big\r\n", 0),
                  "+OK\r\n-ERR increment or decrement would overflow\r\n");
    ASSERT_STR_EQ(redis(db, &c, "LPUSH mylist a b c\r\nRPUSH mylist z\r\nLPOP mylist\r\nRPOP mylist\r\nLLEN mylist\r\n", 0),
                  ":3\r\n:4\r\n$1\r\nc\r\n$1\r\nz\r\n:2\r\n");
    ASSERT_STR_EQ(redis(db, &c, "LPOP mylist 5\r\nLPOP mylist\r\nEXISTS mylist\r\n", 0),
                  "*2\r\n$1\r\nb\r\n$1\r\na\r\n$-1\r\n:0\r\n");
    ASSERT_STR_EQ(redis(db, &c, "LPUSH counter x\r\nGET nosuch\r\n", 0),
                  "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n$-1\r\n");
    ASSERT_STR_EQ(redis(db, &c, "MSET k1 v1 k2 v2\r\nMGET k1 nosuch k2\r\n", 0),
                  "+OK\r\n*3\r\n$2\r\nv1\r\n$-1\r\n$2\r\nv2\r\n");
    ASSERT_STR_EQ(redis(db, &c, "MSET k1\r\nDEL k1 k2 k3\r\nECHO hi\r\nPING there\r\n", 0),
                  "-ERR wrong number of arguments for 'mset' command\r\n:2\r\n$2\r\nhi\r\n$5\r\nthere\r\n");
    ASSERT_STR_EQ(redis(db, &c, "FLUSHALL\r\nDBSIZE\r\nSELECT 0\r\nSELECT 1\r\n", 0),
                  "+OK\r\n:0\r\n+OK\r\n-ERR DB index is out of range\r\n");
    ASSERT_STR_EQ(redis(db, &c, "NOSUCH a b\r\nGET\r\n\r\n*0\r\n", 0),
                  "-ERR unknown command 'NOSUCH'\r\n-ERR wrong number of arguments for 'get' command\r\n");
    ASSERT_STR_EQ(redis(db, &c, "QUIT\r\nPING\r\n", -ECONNRESET), "+OK\r\n");
    /* protocol errors end the connection after -ERR */
    static const char *const bad[] = {
        "*x\r\n", "*2\r\n:3\r\n", "*1\r\n$-5\r\n", "*1\r\n$99999999999\r\n", "*1\r\n$3\r\nGETxx",
        "*2000\r\n", "*1\r\n$1x\r\n",
        /* leading zeros, refused as redis does: "*000...01" would otherwise be
         * refused or taken depending on how much of it has arrived */
        "*01\r\n$4\r\nPING\r\n", "*1\r\n$04\r\nPING\r\n", "*-0\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        srv_conn_free(&c);
        c = conn("redis");
        ASSERT_STR_CONTAINS(redis(db, &c, bad[i], -EPROTO), "-ERR Protocol error");
    }
    /* an inline line longer than 64 KiB */
    srv_conn_free(&c);
    c = conn("redis");
    char *big = malloc(70000);
    memset(big, 'a', 70000);
    ASSERT_EQ(redis_feed(db, &c, big, 70000), -EMSGSIZE);
    ASSERT_STR_CONTAINS(out_str(&c), "too big inline request");
    free(big);
    srv_conn_free(&c);
    rdb_free(db);
}

/* ---- http ----------------------------------------------------------------------------- */

static const char *http(struct srv_conn *c, const char *in, ssize_t expect)
{
    out_reset(c);
    ASSERT_EQ(http_feed(c, in, strlen(in)), expect);
    return out_str(c);
}

static void test_http(void)
{
    struct srv_conn c = conn("http");
    const char *wrk = "GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n";
    const char *ok = "HTTP/1.1 200 OK\r\nServer: usched\r\nContent-Type: text/plain\r\nContent-Length: 14\r\n\r\n"
                     "Hello, World!\n";
    ASSERT_STR_EQ(http(&c, wrk, 0), ok);
    char two[256];
    snprintf(two, sizeof two, "%s%s", wrk, wrk);
    char want[512];
    snprintf(want, sizeof want, "%s%s", ok, ok);
    ASSERT_STR_EQ(http(&c, two, 0), want);
    out_reset(&c);
    for (size_t i = 0; wrk[i]; i++) ASSERT_EQ(http_feed(&c, wrk + i, 1), 0);
    ASSERT_STR_EQ(out_str(&c), ok);
    ASSERT_STR_CONTAINS(http(&c, "HEAD / HTTP/1.1\r\n\r\n", 0), "Content-Length: 14\r\n\r\n");
    ASSERT(!strstr(out_str(&c), "Hello"));
    ASSERT_STR_CONTAINS(http(&c, "GET /nothing HTTP/1.1\r\n\r\n", 0), "HTTP/1.1 404 Not Found");
    ASSERT_STR_CONTAINS(http(&c, "POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", 0), "405");
    ASSERT_STR_CONTAINS(http(&c, "GET /?q=1 HTTP/1.1\r\nConnection: keep-alive, Upgrade\r\n\r\n", 0), "200 OK");
    ASSERT_STR_CONTAINS(http(&c, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n", -ECONNRESET), "Connection: close");
    srv_conn_free(&c);
    c = conn("http");
    ASSERT_STR_CONTAINS(http(&c, "GET / HTTP/1.0\r\n\r\n", -ECONNRESET), "200 OK");
    srv_conn_free(&c);
    c = conn("http");
    ASSERT_STR_CONTAINS(http(&c, "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", 0), "200 OK");
    static const struct {
        const char *req;
        const char *status;
    } bad[] = {
        {"GARBAGE\r\n\r\n", "400"},
        {"GET / HTTP/2.0\r\n\r\n", "505"},
        {"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", "501"},
        {"GET / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n", "413"},
        {"GET / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", "400"},
        {"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "400"},
        {"GET / HTTP/1.1\r\nNo colon here\r\n\r\n", "400"},
        {"GET  / HTTP/1.1\r\n\r\n", "400"},
        {"GET / HTTP/1.1\nHost: x\r\n\r\n", "400"},
        {"\r\n\r\n", "400"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        srv_conn_free(&c);
        c = conn("http");
        const char *r = http(&c, bad[i].req, -EPROTO);
        ASSERT_STR_CONTAINS(r, bad[i].status);
        ASSERT_STR_CONTAINS(r, "Connection: close");
    }
    srv_conn_free(&c);
    c = conn("http");
    char *big = malloc(HTTP_MAX_HEAD + 10);
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
    memset(big + 19, 'a', HTTP_MAX_HEAD + 10 - 19);
    ASSERT_EQ(http_feed(&c, big, HTTP_MAX_HEAD + 10), -EPROTO);
    ASSERT_STR_CONTAINS(out_str(&c), "431");
    free(big);
    srv_conn_free(&c);
}

static void test_echo(void)
{
    struct srv_conn c = conn("echo");
    ASSERT_EQ(echo_feed(&c, "hello\0world", 11), 0);
    ASSERT_EQ(c.out_len, 11);
    ASSERT(!memcmp(c.out, "hello\0world", 11));
    srv_conn_free(&c);
}

/* ---- garbage ------------------------------------------------------------------------------- */

/* Random bytes, and random mutations of valid requests, into every
 * protocol: each feed must end in 0 (waiting) or a refusal, and the
 * sanitizers check every byte touched. */
static void test_garbage(void)
{
    static const char *const seeds[] = {
        "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n",
        "Q\0\0\0\x2aSELECT abalance FROM pgbench_accounts WHERE aid = 5;",
        "\0\0\0\x08\0\0\0\x04",
    };
    uint64_t x = 88172645463325252ull;
    long rounds = test_scale(20000);
    struct pgdb *db;
    struct rdb *rdb;
    char err[128];
    ASSERT_OK(pgdb_create(1, &db, err, sizeof err));
    ASSERT_OK(rdb_create(&rdb));
    for (long i = 0; i < rounds; i++) {
        unsigned char buf[512];
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t n = 1 + x % sizeof buf;
        const char *seed = seeds[x % 4];
        size_t sl = x % 4 == 2 ? 47 : x % 4 == 3 ? 8 : strlen(seed);
        for (size_t k = 0; k < n; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[k] = k < sl && x % 8 ? (unsigned char)seed[k] : (unsigned char)(x >> 24);
        }
        struct srv_conn c;
        ssize_t r;
        switch (i % 5) {
        case 0:
            c = conn("tbench");
            r = tbench_feed(&c, buf, n);
            break;
        case 1: {
            c = conn("pgbench");
            struct pg_session *s = pg_session_new(db);
            if (x & 1) { /* past the startup: message garbage */
                char su[128];
                size_t sn = pg_startup_msg(su);
                ASSERT_EQ(pg_feed(s, &c, su, sn), 0);
            }
            r = pg_feed(s, &c, buf, n);
            pg_session_free(s);
            break;
        }
        case 2:
            c = conn("redis");
            r = redis_feed(rdb, &c, buf, n);
            break;
        case 3:
            c = conn("http");
            r = http_feed(&c, buf, n);
            break;
        default:
            c = conn("echo");
            r = echo_feed(&c, buf, n);
            ASSERT_EQ(c.out_len, n);
            break;
        }
        ASSERT(r <= 0);
        srv_conn_free(&c);
    }
    char msg[200];
    ASSERT_OK(pgdb_check(db, msg, sizeof msg)); /* garbage never moves money */
    pgdb_free(db);
    rdb_free(rdb);
}

/* ---- limits ------------------------------------------------------------------------------- */

/* pgbench: a client-chosen delta that takes a balance (int4) out of range,
 * or a history value out of int4, is PostgreSQL's 22003, changes nothing
 * and keeps no lock; within a transaction it aborts it. (Summed in int64,
 * such deltas overflowed: undefined behaviour, which UBSan reports.) */
static void test_pg_overflow(void)
{
    struct pgdb *db;
    char err[200], msg[200];
    ASSERT_OK(pgdb_create(1, &db, err, sizeof err));
    struct srv_conn c = conn("pgbench");
    struct pg_session *s = pg_connect(db, &c);
    static const char big[] = "UPDATE pgbench_accounts SET abalance = abalance + 9223372036854775807 WHERE aid = 1";
    /* twice in one transaction: the second passed int64 in the undo sum */
    char q[256];
    snprintf(q, sizeof q, "BEGIN; %s; %s", big, big);
    struct pg_reply r = pg_query(s, &c, q);
    ASSERT_STR_EQ(r.types, "CEZ");
    ASSERT_STR_EQ(r.sqlstate, "22003");
    ASSERT_EQ(r.status, 'E');
    ASSERT_STR_EQ(pg_query(s, &c, big).sqlstate, "25P02");
    ASSERT_STR_EQ(pg_query(s, &c, "ROLLBACK").tag, "ROLLBACK");
    /* two in one transaction, each in range, together not */
    ASSERT_STR_EQ(pg_query(s, &c, "BEGIN").tag, "BEGIN");
    ASSERT_STR_EQ(pg_query(s, &c, "UPDATE pgbench_accounts SET abalance = abalance + 2147483647 WHERE aid = 1").tag,
                  "UPDATE 1");
    ASSERT_STR_EQ(pg_query(s, &c, "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 1").sqlstate,
                  "22003");
    ASSERT_STR_EQ(pg_query(s, &c, "END").tag, "ROLLBACK");
    /* autocommit: the lowest int4 is fine, one below it is not, and the row stays free */
    static const char down[] = "UPDATE pgbench_tellers SET tbalance = tbalance + -2147483648 WHERE tid = 2";
    ASSERT_STR_EQ(pg_query(s, &c, down).tag, "UPDATE 1");
    r = pg_query(s, &c, "UPDATE pgbench_tellers SET tbalance = tbalance + -1 WHERE tid = 2");
    ASSERT_STR_EQ(r.sqlstate, "22003");
    ASSERT_EQ(r.status, 'I');
    ASSERT_STR_EQ(pg_query(s, &c, "UPDATE pgbench_tellers SET tbalance = tbalance + 2147483647 WHERE tid = 2").tag,
                  "UPDATE 1");
    ASSERT_STR_EQ(pg_query(s, &c, "UPDATE pgbench_tellers SET tbalance = tbalance + 1 WHERE tid = 2").tag, "UPDATE 1");
    /* pgbench_history's columns are int4 too */
    r = pg_query(s, &c, "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) "
                        "VALUES (1, 1, 1, 4294967296, CURRENT_TIMESTAMP)");
    ASSERT_STR_EQ(r.sqlstate, "22003");
    ASSERT_STR_EQ(pg_query(s, &c, "select sum(abalance) from pgbench_accounts").value, "0");
    ASSERT_STR_EQ(pg_query(s, &c, "select sum(tbalance) from pgbench_tellers").value, "0");
    pg_session_free(s);
    ASSERT_OK(pgdb_check(db, msg, sizeof msg));
    srv_conn_free(&c);
    pgdb_free(db);
}

static uint64_t fnv1a(const char *p, size_t n)
{
    uint64_t h = UINT64_C(14695981039346656037);
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * UINT64_C(1099511628211);
    return h;
}

/* redis: the keyspace hash is SipHash-1-3 (checked against the values of
 * Python's hash(), SipHash-1-3 under an all-zero key with PYTHONHASHSEED=0)
 * keyed per keyspace, so keys chosen to collide under an unkeyed hash
 * spread over the table. */
static void test_redis_hash(void)
{
    static const uint64_t zero[2] = {0, 0};
    static const struct {
        const char *s;
        uint64_t h;
    } vec[] = {
        {"abc", UINT64_C(0xc03bc3a0042630f2)},
        {"abcdefgh", UINT64_C(0x3f7b849c0b8e35ea)},
        {"abcdefghijklmnop", UINT64_C(0x94f60d3d29e6a312)},
        {"abcdefghijklmnopq", UINT64_C(0x61c47e6da27eaccc)},
        {"hello world, this is", UINT64_C(0x06c40284f89d59c6)},
    };
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++)
        ASSERT_EQ_U(rdb_siphash13(zero, vec[i].s, strlen(vec[i].s)), vec[i].h);
    /* 256 keys whose FNV-1a hashes agree in their low 16 bits: under that
     * hash all would share one shard and one chain */
    struct rdb *db;
    ASSERT_OK(rdb_create(&db));
    struct srv_conn c = conn("redis");
    char key[32], cmd[96];
    int found = 0;
    uint64_t want = fnv1a("flood:0", 7) & 0xffff;
    for (long i = 0; found < 256; i++) {
        int n = snprintf(key, sizeof key, "flood:%ld", i);
        if ((fnv1a(key, (size_t)n) & 0xffff) != want) continue;
        snprintf(cmd, sizeof cmd, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\nv\r\n", n, key);
        ASSERT_STR_EQ(redis(db, &c, cmd, 0), "+OK\r\n");
        found++;
    }
    ASSERT_STR_EQ(redis(db, &c, "DBSIZE\r\n", 0), ":256\r\n");
    size_t longest = rdb_longest_chain(db);
    printf("longest hash chain after 256 keys colliding under FNV-1a: %zu\n", longest);
    ASSERT_LE(longest, 16);
    srv_conn_free(&c);
    rdb_free(db);
}

/* The output bound without sockets: 8,749 tbench requests for 69,995-byte
 * replies (612 MB) in one 70 kB input hold at most the bound plus one reply. */
static void test_output_bound(void)
{
    struct srv_conn c = conn("tbench");
    c.out_max = 64 << 10;
    enum { NREQ = 8749 };
    char *in = malloc(NREQ * 8);
    for (int i = 0; i < NREQ; i++) {
        srv_put_be32(in + 8 * i, 4);
        srv_put_be32(in + 8 * i + 4, 69995);
    }
    ASSERT_EQ(tbench_feed(&c, in, NREQ * 8), 0);
    ASSERT_EQ_U(c.requests, NREQ);
    ASSERT_LE(c.out_hwm, (64 << 10) + 4 + 69995);
    free(in);
    srv_conn_free(&c);
}

/* Reads exactly n bytes from fd into buf. */
static void read_all(int fd, char *buf, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, buf + got, n - got);
        ASSERT(r > 0);
        got += (size_t)r;
    }
}

/* Checks that fd holds the tbench replies of `lens` in order: a length,
 * then that many zero bytes. */
static void expect_replies(int fd, const uint32_t *lens, int n)
{
    static char buf[70000];
    for (int i = 0; i < n; i++) {
        read_all(fd, buf, 4 + lens[i]);
        ASSERT_EQ(srv_be32(buf), lens[i]);
        for (uint32_t k = 0; k < lens[i]; k++) ASSERT_EQ(buf[4 + k], 0);
    }
}

/* Replies sent from where they are (srv_put_ref) on a real socket: tbench's
 * bodies of zeros go out by reference between the copied headers and small
 * bodies, in order, byte for byte; past SRV_REFS references the rest are
 * copied. */
static void test_gather(void)
{
    int sv[2];
    ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    struct srv_conn c;
    ASSERT_OK(srv_conn_init(&c, sv[0], srv_proto_find("tbench")->in_max));
    char req[16];
    /* two bodies by reference (4155, 61499 bytes), two copied (under SRV_REF_MIN) */
    static const uint32_t mixed[] = {4155, 39, 61499, 55};
    for (int i = 0; i < 4; i++) {
        srv_put_be32(req, 4);
        srv_put_be32(req + 4, mixed[i]);
        ASSERT_EQ(tbench_feed(&c, req, 8), 0);
    }
    ASSERT_EQ(c.nrefs, 2);
    ASSERT_EQ(c.ref_len, 4155 + 61499);
    ASSERT_EQ(c.out_len, 4 * 4 + 39 + 55);
    ASSERT_EQ(srv_pending(&c), c.out_hwm);
    ASSERT_EQ(srv_flush(&c), 0);
    ASSERT_EQ(srv_pending(&c), 0);
    ASSERT_EQ(c.nrefs, 0);
    expect_replies(sv[1], mixed, 4);
    /* SRV_REFS + 2 large bodies: the last two copied */
    uint32_t many[SRV_REFS + 2];
    for (int i = 0; i < SRV_REFS + 2; i++) {
        many[i] = 1000 + (uint32_t)i;
        srv_put_be32(req, 4);
        srv_put_be32(req + 4, many[i]);
        ASSERT_EQ(tbench_feed(&c, req, 8), 0);
    }
    ASSERT_EQ(c.nrefs, SRV_REFS);
    ASSERT_EQ(c.out_len, (SRV_REFS + 2) * 4 + many[SRV_REFS] + many[SRV_REFS + 1]);
    ASSERT_EQ(srv_flush(&c), 0);
    expect_replies(sv[1], many, SRV_REFS + 2);
    srv_conn_free(&c);
    close(sv[0]);
    close(sv[1]);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } parts[] = {
        {"tbench", test_tbench}, {"pgbench", test_pgbench}, {"redis", test_redis},
        {"http", test_http},     {"echo", test_echo},       {"garbage", test_garbage},
        {"pg_overflow", test_pg_overflow}, {"redis_hash", test_redis_hash}, {"output_bound", test_output_bound},
        {"gather", test_gather},
    };
    int ran = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (argc > 1 && strcmp(argv[1], parts[i].name)) continue;
        parts[i].fn();
        printf("servers_proto %s: ok\n", parts[i].name);
        ran++;
    }
    if (!ran) {
        fprintf(stderr, "test_servers_proto: unknown part '%s'\n", argv[1]);
        return 2;
    }
    return 0;
}
