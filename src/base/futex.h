/*
 * The futex system call (private futexes: the words are never shared with
 * another process) and the relative timeout it takes, for every layer above
 * arch that sleeps on a word of its own.
 */
#ifndef USCHED_BASE_FUTEX_H
#define USCHED_BASE_FUTEX_H

#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* A relative timeout of ns nanoseconds. */
static inline struct timespec usched__ns_timespec(uint64_t ns)
{
    return (struct timespec){(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
}

/* FUTEX_WAIT / FUTEX_WAKE on addr; the system call's result (errno is set
 * on failure, which every caller ignores: a wait is re-checked, a wake-up
 * of nobody is not an error). */
static inline long usched__futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, addr, op | FUTEX_PRIVATE_FLAG, val, ts, NULL, 0);
}

#endif
