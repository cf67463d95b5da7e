/* x86-64 CPU hints for the arch leaf (included by arch/arch.h only). */
#ifndef USCHED_ARCH_X86_64_CPU_H
#define USCHED_ARCH_X86_64_CPU_H

#include <stdint.h>

/* Spin-wait hint: `pause` (lets the sibling hyperthread run, saves power). */
static inline void usched__cpu_relax(void)
{
    __builtin_ia32_pause();
}

/* Time stamp counter: constant-rate and cheap (~20 cycles); not serialising,
 * so it measures spans of many instructions, not single ones. */
static inline uint64_t usched__cycles(void)
{
    return __builtin_ia32_rdtsc();
}

#endif
