/*
 * usched serve http: an HTTP/1.1 server of one page. GET / (and HEAD /)
 * answer 200 with a fixed plain-text body; any other path is 404, any other
 * method 405. Connections are kept alive (HTTP/1.1's default, or HTTP/1.0
 * with Connection: keep-alive), and pipelined requests get their responses
 * in one write. A malformed request gets its 4xx/5xx status and the
 * connection is closed. Point wrk, curl or a browser at
 * http://127.0.0.1:8080/.
 */
#include <errno.h>
#include <string.h>

#include "proto.h"

static const char page[] = "Hello, World!\n";
static const char not_found[] = "Not Found\n";

static void respond(struct srv_conn *c, int status, const char *body, bool send_body, bool keep_alive,
                    const char *extra)
{
    size_t n = strlen(body);
    srv_printf(c,
               "HTTP/1.1 %d %s\r\nServer: usched\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
               "%s%s\r\n",
               status, http_reason(status), n, keep_alive ? "" : "Connection: close\r\n", extra);
    if (send_body) srv_put(c, body, n);
}

static ssize_t http_step(void *st, struct srv_conn *c, const char *in, size_t n)
{
    (void)st;
    struct http_req r;
    ssize_t k = http_parse(in, n, &r);
    if (k == 0) return 0;
    c->requests++;
    if (k < 0) {
        respond(c, r.status, http_reason(r.status), true, false, "");
        return k;
    }
    bool get = r.method_len == 3 && !memcmp(r.method, "GET", 3);
    bool head = r.method_len == 4 && !memcmp(r.method, "HEAD", 4);
    bool root = r.target_len >= 1 && r.target[0] == '/' && (r.target_len == 1 || r.target[1] == '?');
    if (!get && !head)
        respond(c, 405, http_reason(405), true, r.keep_alive, "Allow: GET, HEAD\r\n");
    else if (!root)
        respond(c, 404, not_found, get, r.keep_alive, "");
    else
        respond(c, 200, page, get, r.keep_alive, "");
    return r.keep_alive ? k : -ECONNRESET; /* Connection: close: the reply goes out, then the end */
}

/* Over max_conns: 503, once the client has said something. */
static ssize_t http_refuse(void *st, struct srv_conn *c, const char *in, size_t n)
{
    (void)st, (void)in, (void)n;
    respond(c, 503, http_reason(503), true, false, "");
    return -EBUSY;
}

ssize_t http_feed(struct srv_conn *c, const void *in, size_t n)
{
    return srv_conn_feed(c, http_step, NULL, in, n);
}

static void http_conn(void *state, struct srv_conn *c)
{
    srv_conn_run(c, http_step, state);
}

const struct srv_proto srv_proto_http = {
    .name = "http",
    .default_port = 8080,
    .summary = "HTTP/1.1 keep-alive, GET / answers a fixed body",
    .in_max = HTTP_MAX_HEAD + HTTP_MAX_BODY,
    .refuse = http_refuse,
    .conn = http_conn,
};
