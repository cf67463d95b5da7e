/*
 * What the scheduler prints of itself (schedtrace.c): the wake-up latency
 * summary and the periodic one-line summary of every CPU.
 */
#ifndef USCHED_CORE_SCHEDTRACE_H
#define USCHED_CORE_SCHEDTRACE_H

#include <stdint.h>
#include <stdio.h>

struct usched;
struct usched__schedtrace;

/* The wake-up latency histograms (usched_stats_print, usched_stats_reset). */
void usched__wakelat_print(struct usched *s, FILE *f);
void usched__wakelat_reset(struct usched *s);

/* The periodic summary (USCHED_SCHEDTRACE=MS), run by the stall monitor's
 * thread. new: *st is NULL when it is off (schedtrace_ms 0); 0 or -ENOMEM.
 * tick, at time now: prints a line when one is due, and returns the time
 * until the next one (ns), which the monitor sleeps at most. */
int usched__schedtrace_new(struct usched *s, struct usched__schedtrace **st);
uint64_t usched__schedtrace_tick(struct usched *s, struct usched__schedtrace *st, uint64_t now);
void usched__schedtrace_free(struct usched__schedtrace *st);

#endif
