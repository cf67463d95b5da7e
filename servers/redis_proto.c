/*
 * RESP2, the protocol of redis 2 to 7, as redis-benchmark and redis-cli
 * speak it. A command is either a multibulk array
 *   *<argc>\r\n then for each argument $<len>\r\n<bytes>\r\n
 * or an inline line of words separated by spaces ("PING\r\n"), as
 * redis-benchmark's PING_INLINE test and telnet users send. Replies are
 * +simple strings, -errors, :integers, $bulk strings ($-1 is nil) and
 * *arrays. Pipelining clients send many commands before reading: the
 * parser takes one command at a time from whatever has arrived.
 */
#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "proto.h"

/* Reads a decimal line "<digits>\r\n" after the type byte at p. Returns the
 * bytes up to and including \r\n, 0 if incomplete, -EPROTO if malformed.
 * As redis's string2ll, no leading zero ("01", "-0"): so a valid line is
 * short, and one with 32 bytes and no newline yet can be refused at once. */
static ssize_t read_count(const char *p, const char *end, long long *v, long long max)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) return end - p > 32 ? -EPROTO : 0;
    if (nl == p || nl[-1] != '\r') return -EPROTO;
    const char *q = p + 1;
    bool neg = q < nl - 1 && *q == '-';
    if (neg) q++;
    if (q == nl - 1 || (*q == '0' && (neg || q + 1 < nl - 1))) return -EPROTO;
    long long x = 0;
    for (; q < nl - 1; q++) {
        if (*q < '0' || *q > '9') return -EPROTO;
        x = x * 10 + (*q - '0');
        if (x > max) return -EPROTO;
    }
    *v = neg ? -x : x;
    return nl + 1 - p;
}

static ssize_t parse_inline(const char *in, size_t n, struct resp_cmd *cmd, const char **why)
{
    const char *nl = memchr(in, '\n', n);
    if (!nl) {
        if (n > RESP_MAX_INLINE) {
            *why = "Protocol error: too big inline request";
            return -EMSGSIZE;
        }
        return 0;
    }
    const char *end = nl > in && nl[-1] == '\r' ? nl - 1 : nl;
    cmd->argc = 0;
    for (const char *p = in; p < end;) {
        while (p < end && (*p == ' ' || *p == '\t')) p++;
        if (p == end) break;
        const char *w = p;
        while (p < end && *p != ' ' && *p != '\t') p++;
        if (cmd->argc == RESP_MAX_ARGS) {
            *why = "Protocol error: too many arguments";
            return -EPROTO;
        }
        cmd->argv[cmd->argc] = w;
        cmd->len[cmd->argc++] = (size_t)(p - w);
    }
    return nl + 1 - in;
}

ssize_t resp_parse(const char *in, size_t n, struct resp_cmd *cmd, const char **why)
{
    *why = NULL;
    if (n == 0) return 0;
    if (in[0] != '*') return parse_inline(in, n, cmd, why);
    const char *p = in, *end = in + n;
    long long argc;
    ssize_t k = read_count(p, end, &argc, RESP_MAX_ARGS);
    if (k < 0) {
        *why = "Protocol error: invalid multibulk length";
        return k;
    }
    if (k == 0) return 0;
    p += k;
    cmd->argc = 0;
    if (argc <= 0) return p - in; /* *0 and *-1: nothing to do */
    for (long long i = 0; i < argc; i++) {
        if (p == end) return 0;
        if (*p != '$') {
            *why = "Protocol error: expected '$'";
            return -EPROTO;
        }
        long long len;
        k = read_count(p, end, &len, RESP_MAX_BULK);
        if (k < 0 || (k > 0 && len < 0)) {
            *why = "Protocol error: invalid bulk length";
            return -EPROTO;
        }
        if (k == 0) return 0;
        p += k;
        if (end - p < len + 2) return 0;
        if (p[len] != '\r' || p[len + 1] != '\n') {
            *why = "Protocol error: bulk string not followed by CRLF";
            return -EPROTO;
        }
        cmd->argv[cmd->argc] = p;
        cmd->len[cmd->argc++] = (size_t)len;
        p += len + 2;
    }
    return p - in;
}

void resp_put_simple(struct srv_conn *c, const char *s)
{
    srv_printf(c, "+%s\r\n", s);
}

void resp_put_error(struct srv_conn *c, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    for (char *q = buf; *q; q++) /* an error is one line */
        if (*q == '\r' || *q == '\n') *q = ' ';
    srv_printf(c, "-%s\r\n", buf);
}

void resp_put_int(struct srv_conn *c, long long v)
{
    srv_printf(c, ":%lld\r\n", v);
}

void resp_put_bulk(struct srv_conn *c, const char *p, size_t n)
{
    srv_printf(c, "$%zu\r\n", n);
    srv_put(c, p, n);
    srv_put(c, "\r\n", 2);
}

void resp_put_nil(struct srv_conn *c)
{
    srv_put(c, "$-1\r\n", 5);
}

void resp_put_array(struct srv_conn *c, long long n)
{
    srv_printf(c, "*%lld\r\n", n);
}
