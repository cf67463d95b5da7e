/* aarch64 CPU hints for the arch leaf (included by arch/arch.h only). */
#ifndef USCHED_ARCH_AARCH64_CPU_H
#define USCHED_ARCH_AARCH64_CPU_H

#include <stdint.h>
#include <ucontext.h>

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

/* Preemption (core/preempt.c): the interrupted program counter and stack
 * pointer in a signal handler's ucontext. */
static inline uintptr_t usched__uc_pc(const void *uc)
{
    return (uintptr_t)((const ucontext_t *)uc)->uc_mcontext.pc;
}
static inline uintptr_t usched__uc_sp(const void *uc)
{
    return (uintptr_t)((const ucontext_t *)uc)->uc_mcontext.sp;
}
/* No restorer: without SA_RESTORER the kernel returns through the vDSO's
 * sigreturn trampoline. */
#define USCHED__SA_RESTORER 0ul
#define USCHED__SIG_RESTORER NULL

#endif
