/*
 * Option parsing shared by the subcommands: the whole parser of the small
 * listing commands (policies, knobs: only --help and, where asked, --check
 * SPEC), and the usage-error and integer helpers of the others.
 */
#ifndef USCHED_CLI_OPTS_H
#define USCHED_CLI_OPTS_H

/* Returns -1 to go on, else the exit status (0 after --help, 2 bad usage).
 * check NULL: the command takes no --check. */
int cli_parse_opts(const char *cmd, const char *usage, int argc, char **argv, const char **check);

/* Prints "usched CMD: <message> (see usched HELP --help)" on stderr and
 * returns 2, the exit status of bad usage. */
int cli_usage_error(const char *cmd, const char *help, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Parses the decimal integer s of option opt into *out: 0, or the
 * cli_usage_error status when it is not an integer or not in [min, max]. */
int cli_parse_long(const char *cmd, const char *help, const char *opt, const char *s, long min, long max,
                   long *out);

#endif
