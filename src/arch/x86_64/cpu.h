/* x86-64 CPU hints for the arch leaf (included by arch/arch.h only). */
#ifndef USCHED_ARCH_X86_64_CPU_H
#define USCHED_ARCH_X86_64_CPU_H

#include <stdint.h>
#include <ucontext.h>

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

/* Asks for the cache line at p in a state this CPU may write (prefetchw):
 * the line moves here while other work goes on, instead of at the first
 * store. x86-64 CPUs without it (Intel before Broadwell) decode it as a
 * no-op, so it is written out rather than left to -mprfchw. A hint: p need
 * not be mapped. */
static inline void usched__prefetch_w(const void *p)
{
    __asm__ __volatile__("prefetchw %0" ::"m"(*(const char *)p));
}

/* Preemption (core/preempt.c): the interrupted program counter and stack
 * pointer in a signal handler's ucontext. */
static inline uintptr_t usched__uc_pc(const void *uc)
{
    return (uintptr_t)((const ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
}
static inline uintptr_t usched__uc_sp(const void *uc)
{
    return (uintptr_t)((const ucontext_t *)uc)->uc_mcontext.gregs[REG_RSP];
}
/* The kernel needs SA_RESTORER and a restorer (sigret.S) from a handler
 * installed without libc (rt_sigaction). */
#define USCHED__SA_RESTORER 0x04000000ul
void usched__sig_restorer(void);
#define USCHED__SIG_RESTORER usched__sig_restorer

#endif
