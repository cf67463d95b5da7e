/*
 * usched serve echo: every byte a client sends comes back, as the echo
 * service of RFC 862 over TCP. Each read is answered by one write of the
 * same bytes, so a request/response client sees one round trip per
 * message and a streaming client is limited only by the loopback.
 */
#include "proto.h"

#define ECHO_BUFFER 65536

static ssize_t echo_step(void *st, struct srv_conn *c, const char *in, size_t n)
{
    (void)st;
    srv_put(c, in, n);
    c->requests++;
    return (ssize_t)n;
}

ssize_t echo_feed(struct srv_conn *c, const void *in, size_t n)
{
    return srv_conn_feed(c, echo_step, NULL, in, n);
}

static void echo_conn(void *state, struct srv_conn *c)
{
    srv_conn_run(c, echo_step, state);
}

const struct srv_proto srv_proto_echo = {
    .name = "echo",
    .default_port = 7007,
    .summary = "echoes every byte back",
    .in_max = ECHO_BUFFER,
    .conn = echo_conn,
};
