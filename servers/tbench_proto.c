/*
 * The tbench wire format (dbench 4.0's sockio.c and tbench_srv.c).
 *
 * A request is a 4-byte big-endian length n, then n bytes whose first word
 * (big-endian) is the size of the reply's body. The reply is that size as
 * a 4-byte big-endian word, then that many bytes; the client checks the
 * word and discards the bytes. The first exchange (8 bytes each way) is the
 * handshake. tbench_srv refuses n + 4 >= 70000, and so do we; requests of
 * the load file reach 65,595 bytes and replies 61,499.
 */
#include <errno.h>

#include "proto.h"

ssize_t tbench_parse(const char *in, size_t n, struct tbench_req *r)
{
    if (n < 4) return 0;
    uint32_t len = srv_be32(in);
    if (len < 4 || (uint64_t)len + 4 >= TBENCH_MAX_FRAME) return -EPROTO;
    if (n < 4 + (size_t)len) return 0;
    r->reply_len = srv_be32(in + 4);
    if ((uint64_t)r->reply_len + 4 >= TBENCH_MAX_FRAME) return -EPROTO;
    return 4 + (ssize_t)len;
}
