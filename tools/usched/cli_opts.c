/* Option parsing of the listing subcommands (cli_opts.h). */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli_opts.h"

int cli_parse_opts(const char *cmd, const char *usage, int argc, char **argv, const char **check)
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

int cli_usage_error(const char *cmd, const char *help, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "usched %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see usched %s --help)\n", help);
    return 2;
}

int cli_parse_long(const char *cmd, const char *help, const char *opt, const char *s, long min, long max,
                   long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno == ERANGE) return cli_usage_error(cmd, help, "%s '%s': not an integer", opt, s);
    if (v < min || v > max)
        return cli_usage_error(cmd, help, "%s '%s': must be in [%ld, %ld]", opt, s, min, max);
    *out = v;
    return 0;
}
