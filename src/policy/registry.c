/* The built-in policies, by name. */
#include <string.h>

#include "usched/policy.h"

extern const struct usched_ops usched__policy_usched;

#define USCHED_POLICIES(X) X(usched)

static const struct usched_ops *const policies[] = {
#define X(name) &usched__policy_##name,
    USCHED_POLICIES(X)
#undef X
};

#define NPOLICIES ((int)(sizeof policies / sizeof policies[0]))

const struct usched_ops *usched__policy_find(const char *name);
int usched__policy_count(void);
const struct usched_ops *usched__policy_at(int i);

const struct usched_ops *usched__policy_find(const char *name)
{
    if (!name) return NULL;
    for (int i = 0; i < NPOLICIES; i++)
        if (strcmp(policies[i]->name, name) == 0) return policies[i];
    return NULL;
}

int usched__policy_count(void)
{
    return NPOLICIES;
}

const struct usched_ops *usched__policy_at(int i)
{
    return i >= 0 && i < NPOLICIES ? policies[i] : NULL;
}
