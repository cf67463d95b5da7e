/* aarch64 CPU hints for the arch leaf (included by arch/arch.h only). */
#ifndef USCHED_ARCH_AARCH64_CPU_H
#define USCHED_ARCH_AARCH64_CPU_H

#include <stdint.h>

/* Spin-wait hint: `yield`. */
static inline void usched__cpu_relax(void)
{
    __asm__ __volatile__("yield" ::: "memory");
}

/* Generic timer virtual count: constant-rate, readable at EL0 on Linux. */
static inline uint64_t usched__cycles(void)
{
    uint64_t v;
    __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
    return v;
}

/* Asks for the cache line at p in a state this CPU may write (prfm
 * pstl1keep); a hint: p need not be mapped. */
static inline void usched__prefetch_w(const void *p)
{
    __builtin_prefetch(p, 1, 3);
}

#endif
