/*
 * The tbench wire format (servers/tbench_proto.c): length-prefixed frames
 * asking for replies of a given size. Beyond fuzz_proto.h's checks: the
 * parsed reply size stays under the frame limit, and the server's replies
 * are exactly, frame by frame, the 4-byte size then that many bytes.
 */
#include "fuzz_proto.h"

static ssize_t parse(const char *in, size_t n)
{
    struct tbench_req r;
    ssize_t k = tbench_parse(in, n, &r);
    if (k > 0 && (k < 8 || (size_t)k > n || r.reply_len + 4 >= TBENCH_MAX_FRAME))
        fuzz_fail("tbench_parse: %zd bytes of %zu, reply of %u bytes", k, n, r.reply_len);
    if (k < 0 && k != -EPROTO) fuzz_fail("tbench_parse: error %zd", k);
    return k;
}

/* The reply bytes the frames seen so far ask for. */
static void expect_reply(void *arg, const char *msg, size_t len)
{
    (void)len;
    *(size_t *)arg += 4 + srv_be32(msg + 4);
}

static ssize_t feed(void *arg, struct srv_conn *c, const void *in, size_t n)
{
    (void)arg;
    return tbench_feed(c, in, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t expect = 0;
    ssize_t r = fuzz_parse_stream("tbench_parse", parse, data, size, expect_reply, &expect);
    struct srv_conn c;
    if (fuzz_feed_both("tbench", feed, NULL, NULL, data, size, &c) != r)
        fuzz_fail("tbench: the request loop's verdict differs from the parser's (%zd)", r);
    if (c.out_len != expect) fuzz_fail("tbench: %zu reply bytes, the frames ask for %zu", c.out_len, expect);
    static const char zeros[TBENCH_MAX_FRAME];
    for (size_t i = 0; i < c.out_len;) { /* size word, then zeros */
        size_t body = srv_be32(c.out + i);
        if (body >= TBENCH_MAX_FRAME || body > c.out_len - i - 4 || memcmp(c.out + i + 4, zeros, body))
            fuzz_fail("tbench: the reply at byte %zu is not %zu zero bytes", i, body);
        i += 4 + body;
    }
    srv_conn_free(&c);
    return 0;
}
