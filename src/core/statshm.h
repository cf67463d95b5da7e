/*
 * The live statistics segment (statshm.c, docs/top.md): with
 * USCHED_STATS_SHM=1 a started scheduler mirrors its counters, queue lengths,
 * worker states and wake-up latency histograms into a shared-memory segment
 * (include/usched/stats_shm.h) that `usched top PID` reads. The stall
 * monitor's thread creates, rewrites and removes it; workers never touch it.
 */
#ifndef USCHED_CORE_STATSHM_H
#define USCHED_CORE_STATSHM_H

#include <stdbool.h>
#include <stdint.h>

struct usched;
struct usched__statshm;

/* USCHED_STATS_SHM: 1 on, 0 (unset, empty or "0") off, or -EINVAL (with
 * usched_last_error naming the variable and its value). */
int usched__statshm_wanted(void);
/* Creates s's segment (removing stale ones of processes that are gone).
 * NULL when not wanted, or when it cannot be made (said on stderr: the
 * program runs on without it). */
struct usched__statshm *usched__statshm_create(struct usched *s);
/* Rewrites the segment from s's counters: when USCHED__STATSHM_PERIOD_NS
 * passed since the last rewrite, or always with force; m NULL: nothing. */
void usched__statshm_publish(struct usched__statshm *m, struct usched *s, bool force);
/* Removes the segment and frees m (NULL: nothing). */
void usched__statshm_destroy(struct usched__statshm *m);

#define USCHED__STATSHM_PERIOD_NS 100000000ull /* 100 ms */

#endif
