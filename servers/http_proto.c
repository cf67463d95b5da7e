/*
 * HTTP/1.1 requests (RFC 9112), as wrk, curl and browsers send them: a
 * request line, header lines, an empty line, and a body only when
 * Content-Length says so. Only what a server of a fixed page needs is
 * interpreted: the method, the target, the version, Connection and
 * Content-Length. Chunked request bodies are refused (501).
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "proto.h"

const char *http_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

static bool tchar(char ch) /* RFC 9110 token characters */
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static ssize_t fail(struct http_req *r, int status)
{
    r->status = status;
    return -EPROTO;
}

/* Whether the comma-separated header value [v, e) lists token t. */
static bool lists(const char *v, const char *e, const char *t)
{
    size_t n = strlen(t);
    while (v < e) {
        while (v < e && (*v == ' ' || *v == '\t' || *v == ',')) v++;
        const char *w = v;
        while (v < e && *v != ',' && *v != ' ' && *v != '\t') v++;
        if ((size_t)(v - w) == n && !strncasecmp(w, t, n)) return true;
    }
    return false;
}

ssize_t http_parse(const char *in, size_t n, struct http_req *r)
{
    memset(r, 0, sizeof *r);
    const char *end = memmem(in, n < HTTP_MAX_HEAD ? n : HTTP_MAX_HEAD, "\r\n\r\n", 4);
    if (!end) return n >= HTTP_MAX_HEAD ? fail(r, 431) : 0;
    r->head_len = (size_t)(end - in) + 4;

    /* request line: method SP target SP HTTP/1.x CRLF */
    const char *p = in, *eol = memchr(in, '\r', (size_t)(end + 2 - in));
    if (eol[1] != '\n') return fail(r, 400);
    r->method = p;
    while (p < eol && tchar(*p)) p++;
    r->method_len = (size_t)(p - r->method);
    if (!r->method_len || p == eol || *p++ != ' ') return fail(r, 400);
    r->target = p;
    while (p < eol && *p != ' ' && (unsigned char)*p > 0x20 && *p != 0x7f) p++;
    r->target_len = (size_t)(p - r->target);
    if (!r->target_len || p == eol || *p++ != ' ') return fail(r, 400);
    if (eol - p != 8 || memcmp(p, "HTTP/", 5) || p[6] != '.' || p[5] < '0' || p[5] > '9' || p[7] < '0' ||
        p[7] > '9')
        return fail(r, 400);
    if (p[5] != '1') return fail(r, 505);
    r->minor = p[7] - '0';
    r->keep_alive = r->minor >= 1;

    /* header lines: name ":" OWS value OWS CRLF */
    bool have_length = false;
    int count = 0;
    for (p = eol + 2; p < end + 2; p = eol + 2) {
        eol = memchr(p, '\r', (size_t)(end + 2 - p));
        if (!eol || eol[1] != '\n') return fail(r, 400);
        if (++count > HTTP_MAX_HEADERS) return fail(r, 431);
        const char *name = p;
        while (p < eol && tchar(*p)) p++;
        size_t nlen = (size_t)(p - name);
        if (!nlen || p == eol || *p++ != ':') return fail(r, 400);
        while (p < eol && (*p == ' ' || *p == '\t')) p++;
        const char *v = p, *ve = eol;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
        for (const char *q = v; q < ve; q++)
            if ((unsigned char)*q < 0x20 && *q != '\t') return fail(r, 400);
        if (nlen == 10 && !strncasecmp(name, "connection", 10)) {
            if (lists(v, ve, "close")) r->keep_alive = false;
            if (lists(v, ve, "keep-alive")) r->keep_alive = true;
        } else if (nlen == 14 && !strncasecmp(name, "content-length", 14)) {
            size_t len = 0;
            if (v == ve) return fail(r, 400);
            for (const char *q = v; q < ve; q++) {
                if (*q < '0' || *q > '9') return fail(r, 400);
                len = len * 10 + (size_t)(*q - '0');
                if (len > HTTP_MAX_BODY) return fail(r, 413);
            }
            if (have_length && len != r->body_len) return fail(r, 400);
            have_length = true;
            r->body_len = len;
        } else if (nlen == 17 && !strncasecmp(name, "transfer-encoding", 17)) {
            return fail(r, 501);
        }
    }
    if (n < r->head_len + r->body_len) return 0;
    return (ssize_t)(r->head_len + r->body_len);
}
