/*
 * RESP2, multibulk arrays and inline commands (servers/redis_proto.c).
 * Beyond fuzz_proto.h's checks: every argument of a parsed command lies
 * inside the command's bytes, a refusal says why and success does not, and
 * the server's output is a sequence of well-formed RESP replies. Each
 * input starts from an empty keyspace (FLUSHALL after it), so a finding
 * replays alone.
 */
#include "fuzz_proto.h"

static struct resp_cmd cmd; /* 16 KiB: not on the stack */
static struct rdb *db[2];   /* one per way of feeding: they see the same commands */

static ssize_t parse(const char *in, size_t n)
{
    const char *why = "";
    ssize_t k = resp_parse(in, n, &cmd, &why);
    if (k < 0) {
        if ((k != -EPROTO && k != -EMSGSIZE) || !why || !why[0])
            fuzz_fail("resp_parse: error %zd, reason %s", k, why ? why : "(none)");
        return k;
    }
    if (why) fuzz_fail("resp_parse: %zd with a reason (%s)", k, why);
    if ((size_t)k > n) fuzz_fail("resp_parse: %zd bytes of %zu", k, n);
    if (k == 0) return 0;
    if (cmd.argc < 0 || cmd.argc > RESP_MAX_ARGS) fuzz_fail("resp_parse: %d arguments", cmd.argc);
    for (int i = 0; i < cmd.argc; i++)
        if (cmd.argv[i] < in || cmd.len[i] > (size_t)k || (size_t)(cmd.argv[i] - in) > (size_t)k - cmd.len[i])
            fuzz_fail("resp_parse: argument %d (%zu bytes) outside the command's %zd", i, cmd.len[i], k);
    return k;
}

static ssize_t feed(void *arg, struct srv_conn *c, const void *in, size_t n)
{
    return redis_feed(arg, c, in, n);
}

/* The length of the RESP reply line at p (through \r\n), 0 if none. */
static size_t reply_line(const char *p, const char *e)
{
    const char *nl = memmem(p, (size_t)(e - p), "\r\n", 2);
    return nl ? (size_t)(nl + 2 - p) : 0;
}

static void check_replies(const struct srv_conn *c)
{
    const char *p = c->out, *e = c->out + c->out_len;
    while (p < e) {
        size_t n = reply_line(p, e);
        if (!n || !strchr("+-:$*", *p)) fuzz_fail("redis: a reply at byte %zu is not RESP", (size_t)(p - c->out));
        if (*p == '$' && p[1] != '-') { /* a bulk string: its bytes and \r\n follow */
            size_t len = strtoul(p + 1, NULL, 10);
            if ((size_t)(e - p) - n < len + 2 || memcmp(p + n + len, "\r\n", 2))
                fuzz_fail("redis: a bulk reply at byte %zu overruns", (size_t)(p - c->out));
            n += len + 2;
        }
        p += n;
    }
}

static void flush_all(struct rdb *d)
{
    static const char flush[] = "FLUSHALL\r\n";
    struct srv_conn c;
    if (srv_conn_init(&c, -1, 64) < 0 || redis_feed(d, &c, flush, sizeof flush - 1) != 0) abort();
    srv_conn_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!db[0] && (rdb_create(&db[0]) < 0 || rdb_create(&db[1]) < 0)) abort();
    fuzz_parse_stream("resp_parse", parse, data, size, NULL, NULL);
    struct srv_conn c;
    fuzz_feed_both("redis", feed, db[0], db[1], data, size, &c);
    check_replies(&c);
    srv_conn_free(&c);
    flush_all(db[0]);
    flush_all(db[1]);
    return 0;
}
