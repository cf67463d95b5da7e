/*
 * Fiber descriptors (struct usched_task): dense, cache-line aligned, reused
 * through a per-CPU cache in front of one locked pool, like the stacks
 * (stack.h). Design: desc.c.
 */
#ifndef USCHED_DESC_H
#define USCHED_DESC_H

#include <stdint.h>

#include "arch/arch.h"

struct usched_task;

/* A worker's cache of free descriptors: it refills and spills a quarter
 * and a half of itself at a time, under one pool lock. */
#define USCHED_DESC_CACHE 512
typedef struct usched__desc_cache {
    int n;
    struct usched_task *v[USCHED_DESC_CACHE];
} usched__desc_cache_t;

/* Takes a descriptor (c NULL: from the pool); 0 or -ENOMEM. Its contents
 * are whatever its last fiber left. */
int usched__desc_get(usched__desc_cache_t *c, struct usched_task **out);
/* Returns one (c NULL: to the pool). Never fails: the pool's array has room
 * for every descriptor ever made. */
void usched__desc_put(usched__desc_cache_t *c, struct usched_task *t);
/* Returns every descriptor of cache c to the pool (a worker that exits). */
void usched__desc_cache_drain(usched__desc_cache_t *c);

/* Asks for the three cache lines a spawn writes of descriptor t (task.h),
 * a spawn or two ahead of it: a descriptor freed by a join was often last
 * written by another CPU. */
static inline void usched__desc_prefetch(const struct usched_task *t)
{
    const char *p = (const char *)t;
    usched__prefetch_w(p);
    usched__prefetch_w(p + 64);
    usched__prefetch_w(p + 128);
}

#endif
