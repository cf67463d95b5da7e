/*
 * Pinning workers to CPUs: at start (api.c) each worker to its CPU, and
 * the stall monitor's widening of a contended worker (monitor.c, C4) and
 * its return. A room of its own below both, so the lifecycle and the
 * monitor need not call each other.
 */
#include <pthread.h>
#include <sched.h>

#include "core/core.h"

/* A contended worker is widened onto CPUs where the kernel can give it more
 * time: CPUs that run no worker of s, and those whose worker is not
 * contended itself (monitor.c decides at the start of the episode). Onto a
 * contended sibling it would only take turns with that worker and its
 * neighbour: with 2 clients of tbench or pgbench on 2 CPUs both workers are
 * contended, and widening each onto the other cost 16-22% of the throughput
 * (BENCHMARKS.md, 2026-12-05). */
int usched__wk_widen_set(usched_t *s, const struct usched__wk *w, cpu_set_t *set)
{
    int os[CPU_SETSIZE];
    int n = usched__topo_llc_whole_os(s->topo, w->cpu, os, CPU_SETSIZE), k = 0;
    if (n > CPU_SETSIZE) n = CPU_SETSIZE;
    CPU_ZERO(set);
    for (int i = 0; i < n; i++) {
        int c = usched__topo_cpu_of_os(s->topo, os[i]);
        if (os[i] >= CPU_SETSIZE || (c >= 0 && c != w->cpu && usched__wk_contended(s->wk[c]))) continue;
        CPU_SET(os[i], set);
        k++;
    }
    return k;
}

int usched__wk_pin(usched_t *s, struct usched__wk *w, const cpu_set_t *set)
{
    cpu_set_t one;
    if (!set) {
        CPU_ZERO(&one);
        CPU_SET(s->emu_os ? s->emu_os[w->cpu] : usched__topo_os_index(s->topo, w->cpu), &one);
        set = &one;
    }
    return -pthread_setaffinity_np(w->thread, sizeof *set, set);
}

int usched__worker_of_os(usched_t *s, int os)
{
    if (!s->pinned || os < 0) return -1;
    if (s->emu_os) {
        for (int c = 0; c < s->ncpus; c++)
            if (s->emu_os[c] == os) return c;
        return -1;
    }
    return usched__topo_cpu_of_os(s->topo, os);
}

const int *usched__cpus_near(usched_t *s, int cpu)
{
    return usched__topo_order(s->topo, cpu);
}
