/*
 * HTTP/1.1 requests (servers/http_proto.c). Beyond fuzz_proto.h's checks:
 * a parsed request's method and target lie inside its head, which ends
 * with the empty line, and its length is the head plus the declared body;
 * a refusal carries an error status; and the server answers every request
 * it counts, including the refused one, with exactly one response.
 */
#include "fuzz_proto.h"

static bool inside(const char *p, size_t len, const char *in, size_t n)
{
    return p >= in && len <= n && (size_t)(p - in) <= n - len;
}

static ssize_t parse(const char *in, size_t n)
{
    struct http_req r;
    ssize_t k = http_parse(in, n, &r);
    if (k < 0) {
        if (k != -EPROTO || r.status < 400 || r.status > 599 || !strcmp(http_reason(r.status), "Error"))
            fuzz_fail("http_parse: error %zd with status %d", k, r.status);
        return k;
    }
    if (k == 0) return 0;
    if ((size_t)k != r.head_len + r.body_len || (size_t)k > n || r.head_len < 4 ||
        memcmp(in + r.head_len - 4, "\r\n\r\n", 4) || r.body_len > HTTP_MAX_BODY)
        fuzz_fail("http_parse: %zd bytes of %zu: head %zu, body %zu", k, n, r.head_len, r.body_len);
    if (!r.method_len || !r.target_len || !inside(r.method, r.method_len, in, r.head_len) ||
        !inside(r.target, r.target_len, in, r.head_len) || r.minor < 0 || r.minor > 9)
        fuzz_fail("http_parse: method or target outside the head, or HTTP/1.%d", r.minor);
    return k;
}

static ssize_t feed(void *arg, struct srv_conn *c, const void *in, size_t n)
{
    (void)arg;
    return http_feed(c, in, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_parse_stream("http_parse", parse, data, size, NULL, NULL);
    struct srv_conn c;
    fuzz_feed_both("http", feed, NULL, NULL, data, size, &c);
    /* one response per request: each has the server's header once */
    static const char mark[] = "\r\nServer: usched\r\n";
    uint64_t responses = 0;
    for (const char *p = c.out, *e = c.out + c.out_len;
         (p = memmem(p, (size_t)(e - p), mark, sizeof mark - 1)); p += sizeof mark - 1)
        responses++;
    if (responses != c.requests || (c.out_len && memcmp(c.out, "HTTP/1.1 ", 9)))
        fuzz_fail("http: %llu responses to %llu requests", (unsigned long long)responses,
                  (unsigned long long)c.requests);
    srv_conn_free(&c);
    return 0;
}
