/*
 * The I/O poller as the worker loop sees it: the hooks the core calls from
 * its park path, declared here by the core and implemented by src/io (which
 * sits above the core: the core never includes src/io). See docs/io.md and
 * the top comment of src/io/poller.c for the design and the protocol.
 *
 * Hooks (each names the step of the park protocol in src/core/sched.c it
 * belongs to):
 *   usched__io_start        usched_start: raise RLIMIT_NOFILE (once a process)
 *   usched__io_fini         usched_destroy, after the workers stopped
 *   usched__io_tick         every pick on a busy CPU (tick and time bound): a
 *                           fiber's after finish_prev, the host's that found work
 *   usched__io_poll_idle    an idle CPU before stealing (non-blocking)
 *   usched__io_claim_poller P1: may this parking CPU block in the poller? (or
 *                           leave the role to a spinning CPU, or renew a
 *                           deferral that ran out: until when)
 *   usched__io_unclaim      P3 found work after a successful claim
 *   usched__io_park         P4': block in epoll until the earliest timer
 *   usched__io_dispatch     after P4' and unpark: wake the fibers of ready fds
 *   usched__io_break        W3': wake the CPU parked in the poller
 */
#ifndef USCHED_CORE_POLLER_H
#define USCHED_CORE_POLLER_H

#include <stdbool.h>
#include <stdint.h>

#include "usched.h"

struct usched__wk;

void usched__io_start(usched_t *s);
void usched__io_fini(usched_t *s);
void usched__io_tick_slow(struct usched__wk *w);
void usched__io_poll_idle(struct usched__wk *w);
bool usched__io_claim_poller(usched_t *s, int cpu, bool renew, uint64_t *defer_until);
void usched__io_unclaim(usched_t *s);
void usched__io_park(struct usched__wk *w, uint64_t deadline_ns);
void usched__io_dispatch(struct usched__wk *w);
void usched__io_break(usched_t *s);

#endif
