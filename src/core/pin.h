/*
 * Pinning workers to CPUs (pin.c): at start, the monitor's widening of a
 * contended worker, and the CPUs' order by distance.
 */
#ifndef USCHED_CORE_PIN_H
#define USCHED_CORE_PIN_H

#include <sched.h>

struct usched;
struct usched__wk;

/* Pins w's thread to its CPU (set NULL) or to the OS CPUs of set.
 * 0 or a negative errno. */
int usched__wk_pin(struct usched *s, struct usched__wk *w, const cpu_set_t *set);
/* The CPUs a contended worker w may be widened to (monitor.c C4): its own
 * and those of its LLC that run no worker of s or an uncontended one. Their
 * number (1: its own CPU only), the OS CPUs in *set. */
int usched__wk_widen_set(struct usched *s, const struct usched__wk *w, cpu_set_t *set);
/* The worker of s that runs on the machine's CPU `os` (an OS index, as
 * SO_INCOMING_CPU or sched_getcpu give), -1 when none does or the workers
 * are not pinned (a worker's number then says nothing of where it runs).
 * Emulated: the first worker on that real CPU. */
int usched__worker_of_os(struct usched *s, int os);
/* The CPUs of s nearest first from cpu (itself first): siblings, L2, LLC,
 * package, node, machine, the order stealing goes. */
const int *usched__cpus_near(struct usched *s, int cpu);

#endif
