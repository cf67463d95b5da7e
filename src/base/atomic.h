/*
 * Synchronisation helpers every layer above arch may use: a test-and-test-
 * and-set spin lock for short critical sections, and the full fence of the
 * Dekker-style protocols (parking P2, waking W2 in src/core/park.c).
 */
#ifndef USCHED_BASE_ATOMIC_H
#define USCHED_BASE_ATOMIC_H

#include <stdatomic.h>
#include <stdint.h>

#include "arch/arch.h"

/* A full (StoreLoad) fence. TSan does not model fences, so under TSan it is
 * a seq_cst read-modify-write, which TSan sees as synchronisation. */
#if !defined(__SANITIZE_THREAD__) && defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define __SANITIZE_THREAD__ 1
#endif
#endif
extern _Atomic uint32_t usched__fence_word; /* atomic.c */
#if defined(__SANITIZE_THREAD__)
#define usched__full_fence() atomic_fetch_add_explicit(&usched__fence_word, 0, memory_order_seq_cst)
#else
#define usched__full_fence() atomic_thread_fence(memory_order_seq_cst)
#endif

static inline void usched__spin_lock(_Atomic uint32_t *l)
{
    for (;;) {
        if (!atomic_exchange_explicit(l, 1, memory_order_acquire)) return;
        while (atomic_load_explicit(l, memory_order_relaxed)) usched__cpu_relax();
    }
}

static inline void usched__spin_unlock(_Atomic uint32_t *l)
{
    atomic_store_explicit(l, 0, memory_order_release);
}

#endif
