/*
 * Running a built program from a test: its exit status, stdout and stderr.
 * A program killed by a signal fails the test (bad input must never crash).
 */
#ifndef USCHED_TEST_RUN_H
#define USCHED_TEST_RUN_H

#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

extern char **environ;

struct test_run {
    int status;
    char *out, *err;
};

/* What is left in f from where it stands (closed afterwards), malloc'd and
 * NUL-terminated. */
static inline char *test_read_rest(FILE *f)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char chunk[4096];
    size_t n;
    ASSERT(m);
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) fwrite(chunk, 1, n, m);
    fclose(m);
    fclose(f);
    return buf;
}

/* Everything in f (closed afterwards), from its start. */
static inline char *test_slurp(FILE *f)
{
    rewind(f);
    return test_read_rest(f);
}

/* The command line to start argv: with USCHED_TEST_EMULATOR set in the
 * test's own environment (a command and its options, separated by spaces:
 * the cross build sets it to its qemu-aarch64 line, tests/CMakeLists.txt)
 * and emulate, the program runs under it, since a host without binfmt_misc
 * cannot start a foreign binary directly. qemu-user runs the program in its
 * own process, so the pid it gets is the program's (signals reach it).
 * Returns the number of emulator words before argv (0: none); full has 64
 * slots. */
static inline int test_command_(const char *const *argv, bool emulate, const char **full)
{
    const char *emu = emulate ? getenv("USCHED_TEST_EMULATOR") : NULL;
    static char emu_copy[512];
    int nfull = 0;
    if (emu && *emu) {
        snprintf(emu_copy, sizeof emu_copy, "%s", emu);
        for (char *save, *w = strtok_r(emu_copy, " ", &save); w && nfull < 16;
             w = strtok_r(NULL, " ", &save))
            full[nfull++] = w;
    }
    int emu_words = nfull;
    for (int i = 0; argv[i] && nfull < 63; i++) full[nfull++] = argv[i];
    full[nfull] = NULL;
    return emu_words;
}

/* Runs argv[0] with the NULL-terminated argv and env (NULL: inherit), under
 * USCHED_TEST_EMULATOR when emulate (test_command_). */
static inline struct test_run test_run_argv_(const char *const *argv, char **env, bool emulate)
{
    const char *full[64];
    int emu_words = test_command_(argv, emulate, full);
    FILE *out = tmpfile(), *err = tmpfile();
    ASSERT(out && err);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fileno(out), 1);
    posix_spawn_file_actions_adddup2(&fa, fileno(err), 2);
    pid_t pid;
    int r = emu_words ? posix_spawnp(&pid, full[0], &fa, NULL, (char *const *)full, env ? env : environ)
                      : posix_spawn(&pid, full[0], &fa, NULL, (char *const *)full, env ? env : environ);
    if (r) TEST_FAIL_("spawning %s: %s", full[0], strerror(r));
    posix_spawn_file_actions_destroy(&fa);
    int st;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st))
        TEST_FAIL_("%s %s ... died of signal %d", argv[0], argv[1] ? argv[1] : "", WTERMSIG(st));
    return (struct test_run){WEXITSTATUS(st), test_slurp(out), test_slurp(err)};
}

static inline struct test_run test_run_argv(const char *const *argv, char **env)
{
    return test_run_argv_(argv, env, true);
}

/* The same for a program of the host (a Debian client such as pgbench or
 * /usr/bin/timeout): never under USCHED_TEST_EMULATOR. */
static inline struct test_run test_run_host_argv(const char *const *argv, char **env)
{
    return test_run_argv_(argv, env, false);
}

/* A built program running in the background (a server), under
 * USCHED_TEST_EMULATOR as test_run_argv runs it: its pid and its stdout,
 * read through a pipe as it comes (stderr is the test's). */
struct test_proc {
    pid_t pid;
    FILE *out;
};

static inline struct test_proc test_start_argv(const char *const *argv)
{
    const char *full[64];
    int emu_words = test_command_(argv, true, full);
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_addclose(&fa, p[0]);
    posix_spawn_file_actions_addclose(&fa, p[1]);
    pid_t pid;
    int r = emu_words ? posix_spawnp(&pid, full[0], &fa, NULL, (char *const *)full, environ)
                      : posix_spawn(&pid, full[0], &fa, NULL, (char *const *)full, environ);
    if (r) TEST_FAIL_("spawning %s: %s", full[0], strerror(r));
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    FILE *f = fdopen(p[0], "r");
    ASSERT(f);
    return (struct test_proc){pid, f};
}

/* Waits for the program to end: its exit status (a death by a signal fails
 * the test). What it printed after the lines already read is in *rest
 * (malloc'd, NUL-terminated), and its stdout is closed. */
static inline int test_proc_wait(struct test_proc p, char **rest)
{
    char *buf = test_read_rest(p.out);
    int st;
    ASSERT_EQ(waitpid(p.pid, &st, 0), p.pid);
    if (!WIFEXITED(st)) TEST_FAIL_("pid %d died of signal %d\n%s", (int)p.pid, WTERMSIG(st), buf);
    *rest = buf;
    return WEXITSTATUS(st);
}

static inline void test_run_free(struct test_run r)
{
    free(r.out);
    free(r.err);
}

#endif
