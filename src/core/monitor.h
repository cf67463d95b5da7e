/*
 * The stall monitor (monitor.c, docs/monitor.md): its thread's start and
 * stop. Its wake-up (W-M) is the park room's; the contention verdict it
 * writes is read through worker.h.
 */
#ifndef USCHED_CORE_MONITOR_H
#define USCHED_CORE_MONITOR_H

struct usched;

/* start: 0 or -ENOMEM/-EAGAIN; stop joins it (before the workers stop). */
int usched__monitor_start(struct usched *s);
void usched__monitor_stop(struct usched *s);

#endif
