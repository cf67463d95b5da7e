/*
 * The policies by name: the built-in table (the ops tables of src/policy),
 * policies registered at run time (usched_policy_register, for tests and
 * out-of-tree policies), and their public listing (`usched policies`).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/export.h"
#include "core/core.h"

/* name: the policy's file and its ops table usched__policy_<name>. */
#define USCHED_POLICIES(X) X(usched) X(linux) X(ule) X(bsd4) X(global)

#define X(name) extern const struct usched_ops usched__policy_##name;
USCHED_POLICIES(X)
#undef X

static const struct usched_ops *const builtin[] = {
#define X(name) &usched__policy_##name,
    USCHED_POLICIES(X)
#undef X
};

#define NBUILTIN ((int)(sizeof builtin / sizeof builtin[0]))
#define MAX_REGISTERED 16

/* Registered policies: appended under reg_lock, never removed; readers load
 * nreg with acquire (pairs with the release store after the append). */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct usched_ops *registered[MAX_REGISTERED];
static int nreg;

int usched__policy_count(void)
{
    return NBUILTIN + __atomic_load_n(&nreg, __ATOMIC_ACQUIRE);
}

const struct usched_ops *usched__policy_at(int i)
{
    if (i < 0 || i >= usched__policy_count()) return NULL;
    return i < NBUILTIN ? builtin[i] : registered[i - NBUILTIN];
}

const struct usched_ops *usched__policy_find(const char *name)
{
    if (!name) return NULL;
    int n = usched__policy_count();
    for (int i = 0; i < n; i++)
        if (strcmp(usched__policy_at(i)->name, name) == 0) return usched__policy_at(i);
    return NULL;
}

#define KNOWN_OPS_FLAGS (USCHED_OPS_SHARED_RQ | USCHED_OPS_NO_STEAL | USCHED_OPS_TRACK_TIME | USCHED_OPS_SMT_RULE | \
                         USCHED_OPS_SYNC_REUSE | USCHED_OPS_FORK_NEXT)

USCHED_EXPORT int usched_policy_register(const struct usched_ops *ops)
{
    if (!ops) return usched__error(EINVAL, "policy_register: ops is NULL");
    if (!ops->name || !*ops->name || strlen(ops->name) > 32 || strpbrk(ops->name, " ,=\t\n"))
        return usched__error(EINVAL, "policy_register: name '%s' must be 1-32 characters without "
                                     "spaces, commas or '='", ops->name ? ops->name : "(null)");
    if (!ops->brief)
        return usched__error(EINVAL, "policy_register: policy '%s' has no brief", ops->name);
    if (ops->flags & ~KNOWN_OPS_FLAGS)
        return usched__error(EINVAL, "policy_register: policy '%s' has unknown flags 0x%x",
                             ops->name, ops->flags & ~KNOWN_OPS_FLAGS);
    if (ops->task_state_size > USCHED_TASK_STATE_MAX)
        return usched__error(EINVAL, "policy_register: policy '%s' asks %zu bytes of task state "
                                     "(at most %d)", ops->name, ops->task_state_size,
                             USCHED_TASK_STATE_MAX);
    pthread_mutex_lock(&reg_lock);
    int rc = 0;
    if (usched__policy_find(ops->name))
        rc = usched__error(EEXIST, "policy_register: a policy named '%s' exists", ops->name);
    else if (nreg == MAX_REGISTERED)
        rc = usched__error(ENOSPC, "policy_register: at most %d policies can be registered",
                           MAX_REGISTERED);
    else {
        registered[nreg] = ops;
        __atomic_store_n(&nreg, nreg + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&reg_lock);
    return rc;
}

/* ---- public listing -------------------------------------------------------- */

USCHED_EXPORT int usched_policy_count(void)
{
    return usched__policy_count();
}

USCHED_EXPORT const char *usched_policy_name(int i)
{
    const struct usched_ops *o = usched__policy_at(i);
    return o ? o->name : NULL;
}

USCHED_EXPORT const char *usched_policy_brief(int i)
{
    const struct usched_ops *o = usched__policy_at(i);
    return o ? o->brief : NULL;
}
