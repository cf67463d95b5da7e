/*
 * usched serve tbench: the server of dbench's tbench benchmark, as
 * tbench_srv is, with a fiber per connection where tbench_srv forks a
 * process. Every request asks for a reply of a given size; the server sends
 * that many zero bytes. The client (`tbench -t 10 4 127.0.0.1`) always
 * connects to port 7003.
 */
#include "proto.h"

static const char zeros[TBENCH_MAX_FRAME];

static ssize_t tbench_step(void *st, struct srv_conn *c, const char *in, size_t n)
{
    (void)st;
    struct tbench_req r;
    ssize_t k = tbench_parse(in, n, &r);
    if (k <= 0) return k; /* incomplete, or a bad length: the connection ends */
    char hdr[4];
    srv_put_be32(hdr, r.reply_len);
    srv_put(c, hdr, 4);
    srv_put_ref(c, zeros, r.reply_len); /* sent from here, as tbench_srv sends from its buffer */
    c->requests++;
    return k;
}

static void tbench_conn(void *state, struct srv_conn *c)
{
    srv_conn_run(c, tbench_step, state);
}

ssize_t tbench_feed(struct srv_conn *c, const void *in, size_t n)
{
    return srv_conn_feed(c, tbench_step, NULL, in, n);
}

const struct srv_proto srv_proto_tbench = {
    .name = "tbench",
    .default_port = 7003,
    .summary = "dbench's tbench server protocol",
    .in_max = TBENCH_MAX_FRAME,
    .conn = tbench_conn,
};
