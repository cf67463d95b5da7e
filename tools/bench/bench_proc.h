/*
 * usched bench: every process the harness starts, in one place: the peer
 * programs (bench_peer.h), the fresh processes of --fresh, the real servers
 * the network workloads are compared on and their clients (bench_net.h).
 *
 * A process starts in a process group of its own, which is killed when it
 * is stopped (tbench_srv forks a process per connection, nginx its
 * workers); a SIGINT, SIGTERM or SIGHUP of usched bench (handled from the
 * first start on) kills the groups still running on its way out (their own
 * groups keep the terminal's Ctrl-C from reaching them), and removes the
 * temporary directories of bench_proc_tmpdir.
 */
#ifndef USCHED_TOOL_BENCH_PROC_H
#define USCHED_TOOL_BENCH_PROC_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct bench_proc {
    pid_t pid; /* also its process group; 0 once reaped */
    int out;   /* read end of its stdout and stderr, or -1 */
};

struct bench_proc_opts {
    const cpu_set_t *cpus; /* its CPU affinity; NULL: this process's */
    bool capture;          /* stdout and stderr into a pipe (out), else /dev/null */
    bool keep_stderr;      /* without capture: stderr stays this process's */
    int fd3;               /* a descriptor the process gets as its fd 3, or -1 */
    bool as_pg;            /* as PostgreSQL's user (bench_proc_pg_user) */
};

/* Runs argv[0] (a path) with argv, stdin from /dev/null. 0, or -1 with err
 * saying why (a failed exec included: "cannot run PATH: reason"). */
int bench_proc_start(struct bench_proc *p, char *const *argv, const struct bench_proc_opts *o, char *err,
                     size_t len);

/* Reads p's output until it closes or deadline (monotonic seconds, INFINITY
 * for none) into buf (NUL-terminated; the tail is kept when it does not
 * fit). false on timeout. */
bool bench_proc_read(struct bench_proc *p, char *buf, size_t len, double deadline);

/* Waits for p to exit by itself until deadline (INFINITY: for ever); false
 * (p killed) on timeout. Its group is killed either way. */
bool bench_proc_wait(struct bench_proc *p, double deadline, int *status);

/* Kills p's process group (SIGTERM, then SIGKILL after a second) and reaps
 * p: its wait status. */
int bench_proc_stop(struct bench_proc *p);

/* Reads p's output into buf until it exits or deadline, and reaps it: its
 * wait status in *status. false on timeout (p killed). */
bool bench_proc_collect(struct bench_proc *p, char *buf, size_t len, double deadline, int *status);

/* Runs argv to completion (within 300 s) with its output in log: its exit
 * status, or -1 (not started, killed, timed out). */
int bench_proc_run(char *const *argv, bool as_pg, char *log, size_t len);

/* Whether something accepts on 127.0.0.1:port. */
bool bench_port_open(int port);

/* Waits until port accepts (a server starting up); false after 20 s, or
 * when p (if not NULL) died first. */
bool bench_port_wait(struct bench_proc *p, int port);

/* A port nobody listens on now (for servers that cannot take port 0); -1
 * if none could be found. */
int bench_port_free(void);

/* The first of the NULL-terminated paths that is executable, or NULL. */
const char *bench_program_find(const char *const *paths);

/* A temporary directory for what ("redis", "nginx", "postgres"), made on
 * first use and removed at exit; NULL with errno set. */
char *bench_proc_tmpdir(const char *what);

/* Makes as_pg processes run as the user postgres when this process is
 * root (PostgreSQL refuses root): 0 with its uid and gid (-1 when not
 * root), or -1 with why. */
int bench_proc_pg_user(uid_t *uid, gid_t *gid, char *why, size_t len);

#endif
