/*
 * Fiber machine context with everything a switch must tell the tools about:
 * AddressSanitizer and ThreadSanitizer fiber hooks and valgrind stack
 * registration. Built on the arch leaf (usched__ctx_switch).
 *
 * Each worker thread has one "host" fctx (its own OS stack) made with
 * usched__fctx_host(); fibers get one from usched__fctx_make(). A switch goes
 * from the host to a fiber, from a fiber back to the host, or straight from
 * one fiber to the next one of its CPU (see "Switching" in core/sched.c); the
 * sanitizer hooks handle all three.
 */
#ifndef USCHED_FCTX_H
#define USCHED_FCTX_H

#include <stddef.h>
#include "arch/arch.h"

typedef struct usched__fctx {
    usched__ctx_t ctx;
    void *stack_lo;      /* lowest usable byte of the stack (NULL for host) */
    size_t stack_size;
    void *asan_fake;     /* ASan fake-stack handle of the suspended side */
    const void *asan_bottom; /* ASan: stack bounds of this context (a host's
                              * are learnt on its first switch to a fiber) */
    size_t asan_size;
    struct usched__fctx *asan_from; /* ASan: context that last switched here */
    void *tsan_fiber;    /* TSan fiber object */
    unsigned vg_id;      /* valgrind stack id */
    int is_host;
} usched__fctx_t;

/* Initialises the worker thread's own context (call on that thread). */
void usched__fctx_host(usched__fctx_t *h);

/* Prepares a fiber context on [lo, lo+size) that runs entry(arg) with the
 * FP modes fp (usched__ctx_fpmode). */
void usched__fctx_make(usched__fctx_t *f, void *lo, size_t size,
                       void (*entry)(void *), void *arg, usched__fpmode_t fp);

/* Switches from the running context `from` to `to`. */
void usched__fctx_switch(usched__fctx_t *from, usched__fctx_t *to);

/* Last switch out of a finished fiber: its stack will be reused or freed. */
void usched__fctx_switch_final(usched__fctx_t *from, usched__fctx_t *to);

/* First thing a fiber's entry function calls (completes the sanitizer
 * switch started by the host). */
void usched__fctx_started(usched__fctx_t *self);

/* Releases tool state of a fiber context (TSan fiber, valgrind id). */
void usched__fctx_destroy(usched__fctx_t *f);

#endif
