/*
 * usched knobs [--check SPEC] lists the knobs; with --check, validates a knob
 *                            setting ("smt=0,affine=1") and prints the values
 *                            it gives
 *
 * Exit status: 0 listed; 1 the knob setting is invalid (the reason on
 * stderr, naming the knob); 2 bad usage.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli_opts.h"
#include "usched.h"
#include "usched/policy.h" /* USCHED_LEVEL_MAP */

int cmd_knobs(int argc, char **argv);

static const char knobs_usage[] =
    "usage: usched knobs [--check SPEC]\n"
    "\n"
    "Lists the knobs (name, type, default, range, whether it may change while\n"
    "running, the policies that read it). Set them with USCHED_KNOBS=SPEC or\n"
    "usched_set(s, \"knobs\", SPEC), SPEC being \"name=value,name=value\".\n"
    "\n"
    "  -c, --check SPEC    validate SPEC and print every knob's resulting value\n"
    "  -h, --help          print this help\n";

/* Validates spec on a scheduler that is never started, and prints the values. */
/* A choice knob's value by its name: the v-th of its range "a|b|c". */
static bool print_choice(const struct usched_knob_info *k, int64_t v)
{
    const char *p = k->range_text;
    for (int64_t i = 0; i < v && p; i++) {
        p = strchr(p, '|');
        if (p) p++;
    }
    if (!p || v < 0) return false;
    printf("%s=%.*s\n", k->name, (int)strcspn(p, "|"), p);
    return true;
}

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
        static const char *const levels[] = {
#define X(id, name, desc) #name,
            USCHED_LEVEL_MAP(X)
#undef X
        };
        if (!strcmp(k.type, "level") && v >= 0 && v < USCHED_NLEVELS)
            printf("%s=%s\n", k.name, levels[v]);
        else if (!strcmp(k.type, "choice") && print_choice(&k, v))
            ;
        else
            printf("%s=%lld\n", k.name, (long long)v);
    }
    usched_destroy(s);
    return fflush(stdout) == 0 ? 0 : 1;
}

int cmd_knobs(int argc, char **argv)
{
    const char *check = NULL;
    int rc = cli_parse_opts("knobs", knobs_usage, argc, argv, &check);
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
