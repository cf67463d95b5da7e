/*
 * global: 4.4BSD's scheduler placement (sched_4bsd.c): one shared run queue.
 *
 * What it does. Every runnable fiber goes to one locked FIFO
 * (USCHED_OPS_SHARED_RQ) that every CPU takes work from; a spawn or wake-up
 * kicks the first idle CPU in the idle mask (4BSD's forward_wakeup of an idle
 * CPU), or none when every CPU is busy. No stealing is needed: there is
 * nothing per CPU to steal. The kicked CPU is not claimed (any CPU may take
 * the fiber from the shared queue).
 *
 * Machines it suits: very small machines (2-4 CPUs) and workloads of long
 * independent jobs, where perfect balance matters more than caches; it is
 * the baseline the other policies are measured against.
 * Where it is weak: every enqueue and pick takes one lock (it stops scaling
 * after a few CPUs); no cache or SMT awareness - a fiber runs on whichever
 * CPU is free, beside a busy sibling or in another LLC.
 */
#include "pol.h"
#include "usched/policy.h"

static void global_select_cpu(usched_pol_ctx_t *ctx, const struct usched_select_args *a,
                              struct usched_select_result *out)
{
    int ref = a->task->prev_cpu >= 0 ? a->task->prev_cpu : a->waker_cpu;
    int c = usched_pol_find_idle(ctx, NULL, 0, false);
    out->slot = USCHED_SLOT_SHARED; /* every fiber goes to the shared queue */
    if (c >= 0) {
        out->cpu = c;
        out->reason = pol_idle_reason(ctx, ref, c);
    } else {
        out->cpu = a->waker_cpu >= 0 ? a->waker_cpu : 0;
        out->reason = USCHED_REASON_SHARED;
    }
}

const struct usched_ops usched__policy_global = {
    .name = "global",
    .brief = "4BSD: one shared locked FIFO; wake the first idle CPU",
    .flags = USCHED_OPS_SHARED_RQ,
    .select_cpu = global_select_cpu,
};
