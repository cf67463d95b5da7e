/*
 * Running a built program from a test: its exit status, stdout and stderr.
 * A program killed by a signal fails the test (bad input must never crash).
 */
#ifndef USCHED_TEST_RUN_H
#define USCHED_TEST_RUN_H

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "test.h"

extern char **environ;

struct test_run {
    int status;
    char *out, *err;
};

/* Everything in f (closed afterwards), from its start. */
static inline char *test_slurp(FILE *f)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char chunk[4096];
    size_t n;
    ASSERT(m);
    rewind(f);
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) fwrite(chunk, 1, n, m);
    fclose(m);
    fclose(f);
    return buf;
}

/* Runs argv[0] with the NULL-terminated argv and env (NULL: inherit). */
static inline struct test_run test_run_argv(const char *const *argv, char **env)
{
    FILE *out = tmpfile(), *err = tmpfile();
    ASSERT(out && err);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fileno(out), 1);
    posix_spawn_file_actions_adddup2(&fa, fileno(err), 2);
    pid_t pid;
    int r = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, env ? env : environ);
    if (r) TEST_FAIL_("spawning %s: %s", argv[0], strerror(r));
    posix_spawn_file_actions_destroy(&fa);
    int st;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st))
        TEST_FAIL_("%s %s ... died of signal %d", argv[0], argv[1] ? argv[1] : "", WTERMSIG(st));
    return (struct test_run){WEXITSTATUS(st), test_slurp(out), test_slurp(err)};
}

static inline void test_run_free(struct test_run r)
{
    free(r.out);
    free(r.err);
}

#endif
