/*
 * Support for the targets of the servers' wire formats (fuzz_tbench.c,
 * fuzz_pgbench.c, fuzz_redis.c, fuzz_http.c; servers/proto.h). The input is
 * what a peer sends on one connection. Two checks beyond "no crash":
 *
 *   - fuzz_parse_stream: the pure parser, message after message, at every
 *     length of what has arrived (each prefix in a buffer of exactly that
 *     size, so ASan sees a read past it). proto.h promises 0 until a message
 *     is complete, then its length, or a negative errno when no more bytes
 *     can make it valid. So: the first non-zero verdict is a refusal or a
 *     message exactly as long as the bytes seen, and it stays the same
 *     whatever arrives after it.
 *   - fuzz_feed_both: the server's request loop (srv_conn_feed) given the
 *     input in one piece and, on a second connection, one byte at a time:
 *     every split point at once. Both must queue the same replies, count
 *     the same requests and end with the same verdict (0 waiting, or the
 *     same refusal).
 *
 * A broken promise prints what broke and aborts, which libFuzzer reports as
 * a finding.
 */
#ifndef USCHED_FUZZ_PROTO_H
#define USCHED_FUZZ_PROTO_H

#include <errno.h>
#include <stdarg.h>

#include "fuzz.h"
#include "proto.h"

__attribute__((format(printf, 1, 2), noreturn)) static inline void fuzz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz: broken promise: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

/* A parser under test: the verdict on in[0, n), after the target's own
 * checks of what it filled in (pointers and lengths within in[0, n)). */
typedef ssize_t fuzz_parse_fn(const char *in, size_t n);
/* Called for each complete message of the stream. */
typedef void fuzz_message_fn(void *arg, const char *msg, size_t len);

/* parse on in[0, n) copied into a buffer of exactly n bytes. */
static inline ssize_t fuzz_parse_exact(fuzz_parse_fn *parse, const uint8_t *in, size_t n)
{
    char *b = malloc(n ? n : 1);
    if (!b) abort();
    memcpy(b, in, n);
    ssize_t r = parse(b, n);
    free(b);
    return r;
}

/* Checks the promises of parse over data as a stream of messages; calls
 * on_message (if any) for each complete one. Returns the verdict of the
 * last: 0 when the stream ends inside a message or at the end of one, or
 * the refusal. Prefixes up to 1 KiB are all tried; longer ones at a
 * stride, narrowed to the exact point when a verdict appears between two. */
static inline ssize_t fuzz_parse_stream(const char *what, fuzz_parse_fn *parse, const uint8_t *data,
                                        size_t size, fuzz_message_fn *on_message, void *arg)
{
    size_t off = 0;
    while (off < size) {
        const uint8_t *in = data + off;
        size_t left = size - off, stride = left > 1024 ? left / 256 : 1;
        size_t n = 0, seen = 0; /* seen: the longest prefix known to give 0 */
        ssize_t r;
        for (;;) {
            r = fuzz_parse_exact(parse, in, n);
            if (r != 0 || n == left) break;
            seen = n;
            size_t step = n < 1024 ? 1 : stride;
            n = n + step > left ? left : n + step;
        }
        if (r == 0) return 0; /* incomplete at the end of the input */
        /* the exact first length with a verdict */
        for (size_t m = seen + 1; m < n; m++) {
            ssize_t q = fuzz_parse_exact(parse, in, m);
            if (q != 0) {
                n = m;
                r = q;
                break;
            }
        }
        if (r > 0 && (size_t)r != n)
            fuzz_fail("%s at offset %zu: a message of %zd bytes after %zu bytes, no verdict before", what, off,
                      r, n);
        /* more bytes change nothing */
        size_t later[] = {n + 1, n + 7, left};
        for (size_t i = 0; i < 3; i++) {
            if (later[i] > left) continue;
            ssize_t q = fuzz_parse_exact(parse, in, later[i]);
            if (q != r)
                fuzz_fail("%s at offset %zu: %zd after %zu bytes, %zd after %zu", what, off, r, n, q, later[i]);
        }
        if (r < 0) return r;
        if (on_message) on_message(arg, (const char *)in, (size_t)r);
        off += (size_t)r;
    }
    return 0;
}

/* A server's request loop over a connection (tbench_feed, pg_feed, ...). */
typedef ssize_t fuzz_feed_fn(void *arg, struct srv_conn *c, const void *in, size_t n);

/* Feeds data to a fresh connection *whole (left initialised: the caller
 * checks its replies and frees it) in one piece, with whole_arg, and to
 * another one byte at a time, with split_arg; both must agree. Returns
 * the verdict. */
static inline ssize_t fuzz_feed_both(const char *proto, fuzz_feed_fn *feed, void *whole_arg, void *split_arg,
                                     const uint8_t *data, size_t size, struct srv_conn *whole)
{
    size_t in_max = srv_proto_find(proto)->in_max;
    struct srv_conn split;
    if (srv_conn_init(whole, -1, in_max) < 0 || srv_conn_init(&split, -1, in_max) < 0) abort();
    ssize_t a = feed(whole_arg, whole, data, size), b = 0;
    size_t at = 0;
    for (; at < size && b == 0; at++) b = feed(split_arg, &split, data + at, 1);
    if (a > 0) fuzz_fail("%s: the request loop returned %zd, not 0 or a refusal", proto, a);
    if (a != b) fuzz_fail("%s: verdict %zd in one piece, %zd byte by byte (at byte %zu)", proto, a, b, at);
    if (whole->out_failed || split.out_failed) abort(); /* out of memory: not a finding */
    if (whole->requests != split.requests)
        fuzz_fail("%s: %llu requests in one piece, %llu byte by byte", proto,
                  (unsigned long long)whole->requests, (unsigned long long)split.requests);
    if (whole->out_len != split.out_len || memcmp(whole->out, split.out, whole->out_len))
        fuzz_fail("%s: the replies differ (%zu bytes in one piece, %zu byte by byte)", proto, whole->out_len,
                  split.out_len);
    srv_conn_free(&split);
    return a;
}

#endif
