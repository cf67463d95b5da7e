/* The echo workloads (bench/WORKLOADS.md, "echo" and "echo100"), shared by the
 * usched side and the C peers: message size, payload, and the check. The Go
 * and Rust peers carry the same definitions. Header-only, C11/C++17. */
#ifndef USCHED_BENCH_PEER_ECHO_H
#define USCHED_BENCH_PEER_ECHO_H

#include <stddef.h>
#include <stdint.h>

#define PEER_ECHO_MSG 64      /* bytes per message */
#define PEER_ECHO_CONNS 100   /* connections of echo100 */
#define PEER_ECHO_BUF 4096    /* the server's read buffer */

/* Byte k of the message of round trip i on connection c. */
static inline uint8_t peer_echo_byte(long c, long i, int k)
{
	return (uint8_t)(i * 7 + k + c * 13);
}

static inline void peer_echo_fill(uint8_t *m, long c, long i)
{
	for (int k = 0; k < PEER_ECHO_MSG; k++) m[k] = peer_echo_byte(c, i, k);
}

static inline int peer_echo_check(const uint8_t *m, long c, long i)
{
	for (int k = 0; k < PEER_ECHO_MSG; k++)
		if (m[k] != peer_echo_byte(c, i, k)) return 0;
	return 1;
}

#endif
