/*
 * Architecture leaf (docs/architecture.md): context switch, CPU relax, cycle
 * counter. One folder per ISA; this header chooses. Nothing here knows about
 * fibers, sanitizers or stacks beyond a stack pointer.
 */
#ifndef USCHED_ARCH_H
#define USCHED_ARCH_H

#include <stddef.h>
#include <stdint.h>

/* Saved machine context: only the stack pointer; the callee-saved registers
 * and FP control words live on the suspended stack. */
typedef struct usched__ctx {
    void *sp;
} usched__ctx_t;

/* Saves the current context into *from and resumes *to. Returns when some
 * other context switches back to *from. */
void usched__ctx_switch(usched__ctx_t *from, usched__ctx_t *to);

/* The FP modes a context runs with, as one word: x86-64, MXCSR's control
 * bits (the exception flags left out) and the x87 control word above them;
 * aarch64, FPCR. */
typedef uint64_t usched__fpmode_t;

/* The caller's FP modes (reading them costs a few dozen cycles on x86-64:
 * stmxcsr and fnstcw are microcoded). */
usched__fpmode_t usched__ctx_fpmode(void);

/* Prepares *ctx so that the first usched__ctx_switch to it runs entry(arg) on
 * the stack [lo, lo + size) with the FP modes fp (from usched__ctx_fpmode).
 * entry must never return. */
void usched__ctx_make(usched__ctx_t *ctx, void *lo, size_t size,
                      void (*entry)(void *), void *arg, usched__fpmode_t fp);

#if defined(__x86_64__)
#include "x86_64/cpu.h"
#elif defined(__aarch64__)
#include "aarch64/cpu.h"
#else
#error "usched supports x86-64 and aarch64"
#endif

/* cpu.h provides:
 *   static inline void usched__cpu_relax(void);      pause / yield hint
 *   static inline uint64_t usched__cycles(void);     cheap monotonic counter
 *   static inline void usched__prefetch_w(const void *p); line p, for writing
 *   static inline uintptr_t usched__uc_pc(const void *uc), usched__uc_sp(...);
 *                        a signal handler's interrupted PC and SP
 *   USCHED__SA_RESTORER, USCHED__SIG_RESTORER: the flag and the function a
 *                        handler installed with rt_sigaction returns through
 */

#endif
