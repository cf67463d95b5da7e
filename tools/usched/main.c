/*
 * usched: the command-line tool. A client of the public API (usched.h) like
 * any other program. One table lists the subcommands; each lives in its own
 * cmd_<name>.c as `int cmd_<name>(int argc, char **argv)` (argv[0] is the
 * subcommand's name) and returns the exit status:
 *   0 success, 1 the request could not be carried out, 2 bad usage.
 */
#include <stdio.h>
#include <string.h>

#include "usched.h"

/* name, one-line summary */
#define USCHED_COMMANDS(X)                                                      \
    X(bench, "run workloads on policies, knobs and peers, side by side")         \
    X(serve, "run a server (tbench, pgbench, redis, http, echo) on usched")     \
    X(topo, "print the CPU topology of this machine or of an input")         \
    X(trace, "summarise a trace file, draw its timeline (--svg)")             \
    X(top, "watch a running program's schedulers live (USCHED_STATS_SHM=1)")     \
    X(policies, "list the placement policies")                                  \
    X(knobs, "list the knobs (runtime tunables), or check a knob setting")

#define X(name, summary) int cmd_##name(int argc, char **argv);
USCHED_COMMANDS(X)
#undef X

static const struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} commands[] = {
#define X(name, summary) {#name, summary, cmd_##name},
    USCHED_COMMANDS(X)
#undef X
};

static void usage(FILE *f)
{
    fputs("usage: usched <command> [options]\n"
          "       usched --help | --version\n"
          "\n"
          "Commands:\n",
          f);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fputs("\nRun 'usched <command> --help' for the options of a command.\n", f);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs("usched: no command given (see usched --help)\n", stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
        printf("usched %s (library %s, hwloc %s)\n", USCHED_VERSION_STRING, usched_version(),
               usched_hwloc_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "usched: unknown %s '%s' (see usched --help)\n",
            cmd[0] == '-' ? "option" : "command", cmd);
    return 2;
}
