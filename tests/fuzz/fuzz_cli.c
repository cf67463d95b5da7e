/*
 * The usched command line: the input is the argument list, NUL-separated,
 * run through the real dispatcher and subcommands (tools/usched/, compiled
 * with main renamed to usched_cli_main). `usched bench` parses, checks and
 * builds its variants but does not run them (bench_parse_only); the other
 * commands run for real, printing to /dev/null. The exit status must be one
 * of the documented 0, 1, 2.
 * Arguments with a '/' are skipped (paths: files and folders are read by the
 * XML target); so are synthetic strings of thousands of CPUs (slow, not
 * wrong), and `usched serve`, which serves until it is stopped (its
 * arguments are checked by the serve_cli_args test; the wire formats have
 * targets of their own).
 */
#include <getopt.h>
#include <stdio.h>

#include "fuzz.h"

int usched_cli_main(int argc, char **argv);
extern int bench_parse_only;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    bench_parse_only = 1;
    if (!freopen("/dev/null", "w", stdout)) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1024) return 0;
    char *buf = malloc(size + 1);
    if (!buf) abort();
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[18] = {"usched"};
    int argc = 1;
    for (char *p = buf; p < buf + size && argc < 17; p += strlen(p) + 1) {
        if (strchr(p, '/') || (strchr(p, ':') && fuzz_cpus_bound(p) > 2048)) {
            free(buf);
            return 0;
        }
        argv[argc++] = p;
    }
    argv[argc] = NULL;
    if (argc > 1 && !strcmp(argv[1], "serve")) {
        free(buf);
        return 0;
    }
    /* getopt keeps a pointer into the previous argument list unless it is
     * re-initialised (optind = 0 before a call); the commands set optind = 1. */
    char *none[] = {"usched", NULL};
    optind = 0;
    getopt(1, none, "");
    int rc = usched_cli_main(argc, argv);
    if (rc < 0 || rc > 2) abort();
    free(buf);
    return 0;
}
