/*
 * The PostgreSQL v3 protocol (servers/pgbench_proto.c) as pgbench and psql
 * speak it: a startup packet (after SSLRequest), then typed messages. Both
 * parsers go over the whole input as a stream (fuzz_proto.h); beyond that,
 * a startup packet's user and database are terminated strings inside it, a
 * message's body lies inside it, and the server's output is a sequence of
 * well-framed backend messages (and the one-byte answer to SSLRequest).
 *
 * The session runs statements on in-memory pgbench tables at scale 1, one
 * set per way of feeding so both see the same rows; an autocommitted
 * UPDATE changes balances that later inputs read, so the tables are built
 * anew every 1024 inputs to bound the history rows they keep.
 */
#include "fuzz_proto.h"

static struct pgdb *db[2];
static unsigned long inputs;

static bool terminated_inside(const char *s, const char *in, size_t k)
{
    return !s || (s >= in + 8 && s < in + k && memchr(s, '\0', (size_t)(in + k - s)));
}

static ssize_t parse_startup(const char *in, size_t n)
{
    struct pg_startup s;
    ssize_t k = pg_parse_startup(in, n, &s);
    if (k < 0 && k != -EPROTO) fuzz_fail("pg_parse_startup: error %zd", k);
    if (k > 0 && ((size_t)k > n || k < 8 || k > PG_MAX_STARTUP || !terminated_inside(s.user, in, (size_t)k) ||
                  !terminated_inside(s.database, in, (size_t)k)))
        fuzz_fail("pg_parse_startup: %zd bytes of %zu; user or database outside", k, n);
    return k;
}

static ssize_t parse_msg(const char *in, size_t n)
{
    struct pg_msg m;
    ssize_t k = pg_parse_msg(in, n, &m);
    if (k < 0 && k != -EPROTO && k != -EMSGSIZE) fuzz_fail("pg_parse_msg: error %zd", k);
    if (k > 0 && ((size_t)k > n || k < 5 || m.body != in + 5 || m.len != (size_t)k - 5 || m.type != in[0]))
        fuzz_fail("pg_parse_msg: %zd bytes of %zu, a body of %zu", k, n, m.len);
    return k;
}

static ssize_t feed(void *arg, struct srv_conn *c, const void *in, size_t n)
{
    return pg_feed(arg, c, in, n);
}

static void check_replies(const struct srv_conn *c)
{
    for (size_t i = 0; i < c->out_len;) {
        if (c->out[i] == 'N') { /* SSLRequest's answer: not a framed message */
            i++;
            continue;
        }
        if (c->out_len - i < 5 || !strchr("RSKZTDCIE", c->out[i]) || srv_be32(c->out + i + 1) < 4 ||
            srv_be32(c->out + i + 1) > c->out_len - i - 1)
            fuzz_fail("pgbench: the reply at byte %zu is not a framed message", i);
        i += 1 + srv_be32(c->out + i + 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (inputs++ % 1024 == 0) {
        char err[128];
        for (int i = 0; i < 2; i++) {
            pgdb_free(db[i]);
            if (pgdb_create(1, &db[i], err, sizeof err) < 0) abort();
        }
    }
    fuzz_parse_stream("pg_parse_startup", parse_startup, data, size, NULL, NULL);
    fuzz_parse_stream("pg_parse_msg", parse_msg, data, size, NULL, NULL);
    struct pg_session *s[2] = {pg_session_new(db[0]), pg_session_new(db[1])};
    if (!s[0] || !s[1]) abort();
    struct srv_conn c;
    fuzz_feed_both("pgbench", feed, s[0], s[1], data, size, &c);
    check_replies(&c);
    srv_conn_free(&c);
    pg_session_free(s[0]);
    pg_session_free(s[1]);
    return 0;
}
