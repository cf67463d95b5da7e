/*
 * The idle-CPU and idle-core masks (idle.c): the one owner of the rule of
 * who is idle, and of the smt rule's judgements on it.
 */
#ifndef USCHED_CORE_IDLE_H
#define USCHED_CORE_IDLE_H

#include <stdbool.h>

#include "core/core.h"

/* The mask of the CPUs of fully idle cores: idle_cpus itself on a
 * topology without SMT, where the two are the same (idle.c). */
static inline usched__idlemask_t *usched__idle_cores(struct usched *s)
{
    return s->smt ? &s->idle_cores : &s->idle_cpus;
}
void usched__idle_set(struct usched *s, int cpu);
void usched__idle_clear(struct usched *s, int cpu);
bool usched__idle_claim(struct usched *s, int cpu);
/* cpu has a busy SMT sibling while a whole core of its LLC is idle (the
 * smt_busy_sibling judgement). `gone` (-1: none) is the CPU of a waker that
 * blocks right after the wake-up (a SYNC hand-off): it counts as idle, as
 * it will be when the fiber runs - not a busy sibling, and its core whole
 * idle if its siblings are. Inline for the topologies without SMT, where
 * every sync hand-off asks it. */
bool usched__idle_beside_busy_smt(struct usched *s, int cpu, int gone);
static inline bool usched__idle_beside_busy(struct usched *s, int cpu, int gone)
{
    return s->smt && usched__idle_beside_busy_smt(s, cpu, gone);
}
/* The policy's smt rule applies to the core's own choices (wakep, steal):
 * USCHED_OPS_SMT_RULE, an SMT machine, knob smt set. */
bool usched__idle_smt_rule(struct usched *s);
/* Under the smt rule, when cpu has a busy sibling: a CPU of a whole idle
 * core of cpu's LLC, the one new work should go to instead; else -1. */
int usched__idle_core_instead(struct usched *s, int cpu);
/* Under the smt rule: cpu has a busy sibling (a CPU of its core other than
 * it is not idle). */
bool usched__idle_rule_beside_busy(struct usched *s, int cpu);
/* Another CPU of cpu's core is busy (false on a core of one CPU). */
bool usched__idle_sibling_busy(struct usched *s, int cpu);
/* The worker w found no work (in the masks, the policy's idle) or found
 * work again (out of them, the policy's busy). */
void usched__wk_go_idle(struct usched *s, struct usched__wk *w);
void usched__wk_go_busy(struct usched *s, struct usched__wk *w);

#endif
