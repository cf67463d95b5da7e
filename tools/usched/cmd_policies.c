/*
 * usched policies            lists the placement policies
 *
 * Exit status: 0 listed; 1 the list could not be written; 2 bad usage.
 */
#include <stdio.h>

#include "cli_opts.h"
#include "usched.h"

int cmd_policies(int argc, char **argv);

static const char policies_usage[] =
    "usage: usched policies\n"
    "\n"
    "Lists the placement policies: choose one with USCHED_POLICY=<name> or\n"
    "usched_set(s, \"policy\", name). The default is 'usched'.\n";

int cmd_policies(int argc, char **argv)
{
    int rc = cli_parse_opts("policies", policies_usage, argc, argv, NULL);
    if (rc >= 0) return rc;
    int n = usched_policy_count();
    for (int i = 0; i < n; i++)
        printf("%-8s %s%s\n", usched_policy_name(i), usched_policy_brief(i),
               i == 0 ? " (default)" : "");
    return fflush(stdout) == 0 ? 0 : 1;
}
