/*
 * The policy registry (registry.c): the policies built in and those a
 * program registered, by name.
 */
#ifndef USCHED_CORE_REGISTRY_H
#define USCHED_CORE_REGISTRY_H

#include "usched/policy.h"

const struct usched_ops *usched__policy_find(const char *name);
int usched__policy_count(void);
const struct usched_ops *usched__policy_at(int i);

#endif
