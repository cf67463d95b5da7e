/*
 * usched policies            lists the placement policies
 * usched knobs [--check SPEC] lists the knobs; with --check, validates a knob
 *                            setting ("smt=0,affine=1") and prints the values
 *                            it gives
 *
 * Exit status: 0 listed; 1 the knob setting is invalid (the reason on
 * stderr, naming the knob); 2 bad usage.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "usched.h"

int cmd_policies(int argc, char **argv);
int cmd_knobs(int argc, char **argv);

static const char policies_usage[] =
    "usage: usched policies\n"
    "\n"
    "Lists the placement policies: choose one with USCHED_POLICY=<name> or\n"
    "usched_set(s, \"policy\", name). The default is 'usched'.\n";

static const char knobs_usage[] =
    "usage: usched knobs [--check SPEC]\n"
    "\n"
    "Lists the knobs (name, type, default, range, whether it may change while\n"
    "running, the policies that read it). Set them with USCHED_KNOBS=SPEC or\n"
    "usched_set(s, \"knobs\", SPEC), SPEC being \"name=value,name=value\".\n"
    "\n"
    "  -c, --check SPEC    validate SPEC and print every knob's resulting value\n"
    "  -h, --help          print this help\n";

/* Only --help (and, for knobs, --check): returns -1 to go on, else the exit
 * status. */
static int parse_opts(const char *cmd, const char *usage, int argc, char **argv, const char **check)
{
    static const struct option opts[] = {
        {"check", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int o;
    opterr = 0;
    optind = 1;
    while ((o = getopt_long(argc, argv, check ? ":c:h" : ":h", check ? opts : opts + 1, NULL)) != -1) {
        switch (o) {
        case 'c': *check = optarg; break;
        case 'h': fputs(usage, stdout); return 0;
        case ':':
            fprintf(stderr, "usched %s: option '%s' needs a value (see usched %s --help)\n", cmd,
                    argv[optind - 1], cmd);
            return 2;
        default:
            fprintf(stderr, "usched %s: unknown option '%s' (see usched %s --help)\n", cmd,
                    argv[optind - 1], cmd);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "usched %s: unexpected argument '%s' (see usched %s --help)\n", cmd,
                argv[optind], cmd);
        return 2;
    }
    return -1;
}

int cmd_policies(int argc, char **argv)
{
    int rc = parse_opts("policies", policies_usage, argc, argv, NULL);
    if (rc >= 0) return rc;
    int n = usched_policy_count();
    for (int i = 0; i < n; i++)
        printf("%-8s %s%s\n", usched_policy_name(i), usched_policy_brief(i),
               i == 0 ? " (default)" : "");
    return fflush(stdout) == 0 ? 0 : 1;
}

/* Validates spec on a scheduler that is never started, and prints the values. */
static int check_spec(const char *spec)
{
    usched_t *s;
    int rc = usched_create(&s);
    if (rc < 0) {
        fprintf(stderr, "usched knobs: %s\n", usched_last_error());
        return 1;
    }
    if ((rc = usched_set(s, "knobs", spec)) < 0) {
        fprintf(stderr, "usched knobs: %s\n", usched_last_error());
        usched_destroy(s);
        return 1;
    }
    for (int i = 0; i < usched_knob_count(); i++) {
        struct usched_knob_info k;
        int64_t v = 0;
        usched_knob_info(i, &k);
        usched_knob_get(s, k.name, &v);
        static const char *const levels[] = {"core", "l2", "llc", "package", "numa", "machine"};
        if (!strcmp(k.type, "level") && v >= 0 && v < 6)
            printf("%s=%s\n", k.name, levels[v]);
        else
            printf("%s=%lld\n", k.name, (long long)v);
    }
    usched_destroy(s);
    return fflush(stdout) == 0 ? 0 : 1;
}

int cmd_knobs(int argc, char **argv)
{
    const char *check = NULL;
    int rc = parse_opts("knobs", knobs_usage, argc, argv, &check);
    if (rc >= 0) return rc;
    if (check) return check_spec(check);
    printf("%-17s %-5s %-8s %-15s %-7s %s\n", "knob", "type", "default", "range", "runtime",
           "read by");
    for (int i = 0; i < usched_knob_count(); i++) {
        struct usched_knob_info k;
        if (usched_knob_info(i, &k) < 0) return 1;
        printf("%-17s %-5s %-8s %-15s %-7s %s\n", k.name, k.type, k.def_text, k.range_text,
               k.runtime ? "yes" : "no", k.policies);
        printf("    %s\n", k.desc);
    }
    return fflush(stdout) == 0 ? 0 : 1;
}
