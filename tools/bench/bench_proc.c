/* usched bench: the processes it starts (bench_proc.h). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_proc.h"
#include "bench_wl.h"

/* ---- the groups still running, and the temporary directories ---------------------------- */

/* The process groups started and not yet reaped, for the signal handler. */
static volatile sig_atomic_t live[16];

static void live_set(pid_t old, pid_t pid)
{
    for (size_t i = 0; i < sizeof live / sizeof live[0]; i++)
        if (live[i] == old) {
            live[i] = pid;
            return;
        }
}

static struct {
    const char *what;
    char *path;
} tmpdirs[8];
static int ntmpdirs;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void remove_tmpdirs(void)
{
    for (int i = 0; i < ntmpdirs; i++) {
        nftw(tmpdirs[i].path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        free(tmpdirs[i].path);
    }
    ntmpdirs = 0;
}

/* From the signal handler: rm -rf each directory (fork, execv and waitpid
 * are async-signal-safe; nftw and free are not). */
static void remove_tmpdirs_now(void)
{
    for (int i = 0; i < ntmpdirs; i++) {
        char *argv[] = {"/bin/rm", "-rf", tmpdirs[i].path, NULL};
        pid_t pid = fork();
        if (pid == 0) {
            execv(argv[0], argv);
            _exit(127);
        }
        if (pid > 0) waitpid(pid, NULL, 0);
    }
}

static void on_fatal_signal(int sig)
{
    for (size_t i = 0; i < sizeof live / sizeof live[0]; i++)
        if (live[i] > 0) kill(-(pid_t)live[i], SIGKILL); /* async-signal-safe */
    remove_tmpdirs_now();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* The signal handlers that kill the running groups, installed with the
 * first process started. */
static void guard(void)
{
    static bool installed;
    if (installed) return;
    installed = true;
    struct sigaction sa = {.sa_handler = on_fatal_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

char *bench_proc_tmpdir(const char *what)
{
    for (int i = 0; i < ntmpdirs; i++)
        if (!strcmp(tmpdirs[i].what, what)) return tmpdirs[i].path;
    char tmpl[128];
    const char *base = getenv("TMPDIR");
    snprintf(tmpl, sizeof tmpl, "%s/usched-%s-XXXXXX", base && *base ? base : "/tmp", what);
    if (ntmpdirs == (int)(sizeof tmpdirs / sizeof tmpdirs[0])) {
        errno = EMFILE;
        return NULL;
    }
    if (!mkdtemp(tmpl)) return NULL;
    if (ntmpdirs == 0) atexit(remove_tmpdirs);
    tmpdirs[ntmpdirs].what = what;
    return tmpdirs[ntmpdirs++].path = strdup(tmpl);
}

/* PostgreSQL's user, when this process is root. */
static struct {
    bool set;
    uid_t uid;
    gid_t gid;
} pg_user;

int bench_proc_pg_user(uid_t *uid, gid_t *gid, char *why, size_t len)
{
    *uid = (uid_t)-1;
    *gid = (gid_t)-1;
    if (getuid() != 0) return 0;
    struct passwd *pw = getpwnam("postgres");
    if (!pw) {
        snprintf(why, len, "postgres refuses to run as root and there is no 'postgres' user");
        return -1;
    }
    pg_user.uid = pw->pw_uid;
    pg_user.gid = pw->pw_gid;
    pg_user.set = true;
    *uid = pw->pw_uid;
    *gid = pw->pw_gid;
    return 0;
}

/* ---- start, read, wait, stop ------------------------------------------------------------ */

/* Only async-signal-safe calls run between fork and exec: this process has
 * threads. A failed exec sends its errno back over a close-on-exec pipe. */
int bench_proc_start(struct bench_proc *p, char *const *argv, const struct bench_proc_opts *o, char *err,
                     size_t len)
{
    int fd[2] = {-1, -1}, ex[2];
    p->out = -1;
    p->pid = 0;
    guard();
    if (o->capture && pipe2(fd, O_CLOEXEC) < 0) {
        snprintf(err, len, "pipe: %s", strerror(errno));
        return -1;
    }
    if (pipe2(ex, O_CLOEXEC) < 0) {
        snprintf(err, len, "pipe: %s", strerror(errno));
        if (o->capture) close(fd[0]), close(fd[1]);
        return -1;
    }
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, len, "fork: %s", strerror(errno));
        if (o->capture) close(fd[0]), close(fd[1]);
        close(ex[0]), close(ex[1]);
        if (devnull >= 0) close(devnull);
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        if (o->cpus) sched_setaffinity(0, sizeof *o->cpus, o->cpus);
        int out = o->capture ? fd[1] : devnull;
        dup2(devnull, 0);
        dup2(out, 1);
        if (o->capture || !o->keep_stderr) dup2(out, 2);
        if (o->fd3 == 3)
            fcntl(3, F_SETFD, 0); /* dup2 onto itself would keep close-on-exec */
        else if (o->fd3 >= 0)
            dup2(o->fd3, 3);
        int e = 0;
        if (o->as_pg && pg_user.set && (setgid(pg_user.gid) < 0 || setuid(pg_user.uid) < 0)) e = errno;
        if (!e) {
            execv(argv[0], argv);
            e = errno;
        }
        ssize_t w = write(ex[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    setpgid(pid, pid); /* both sides, whichever runs first */
    if (devnull >= 0) close(devnull);
    close(ex[1]);
    if (o->capture) {
        close(fd[1]);
        p->out = fd[0];
    }
    p->pid = pid;
    live_set(0, pid);
    int e = 0;
    ssize_t k;
    while ((k = read(ex[0], &e, sizeof e)) < 0 && errno == EINTR) {
    }
    close(ex[0]);
    if (k == (ssize_t)sizeof e) { /* the exec failed: the child exits 127 */
        int st;
        bench_proc_wait(p, INFINITY, &st);
        snprintf(err, len, "cannot run %.200s: %s", argv[0], strerror(e));
        return -1;
    }
    return 0;
}

bool bench_proc_read(struct bench_proc *p, char *buf, size_t len, double deadline)
{
    size_t n = strlen(buf);
    for (;;) {
        double left = deadline - bench_now();
        if (left <= 0) return false;
        struct pollfd pf = {p->out, POLLIN, 0};
        int r = poll(&pf, 1, isinf(deadline) ? -1 : (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) continue;
        char chunk[4096];
        ssize_t k = read(p->out, chunk, sizeof chunk);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return true;
        /* keep the tail: the figures are at the end */
        if (n + (size_t)k >= len) {
            size_t drop = n + (size_t)k - (len - 1);
            if (drop > n) drop = n;
            memmove(buf, buf + drop, n - drop);
            n -= drop;
        }
        size_t take = (size_t)k < len - 1 - n ? (size_t)k : len - 1 - n;
        memcpy(buf + n, chunk + (size_t)k - take, take);
        n += take;
        buf[n] = '\0';
    }
}

/* After p was reaped: its group's leftovers killed, its pipe closed. */
static void reaped(struct bench_proc *p)
{
    kill(-p->pid, SIGKILL); /* children left in the group (tbench_srv's, nginx's workers) */
    if (p->out >= 0) close(p->out);
    live_set(p->pid, 0);
    p->pid = 0;
    p->out = -1;
}

int bench_proc_stop(struct bench_proc *p)
{
    int st = 0;
    if (p->pid <= 0) { /* reaped already (bench_port_wait saw it die) */
        if (p->out >= 0) close(p->out);
        p->out = -1;
        return 0;
    }
    kill(-p->pid, SIGTERM);
    for (int i = 0; i < 100; i++) {
        pid_t r = waitpid(p->pid, &st, WNOHANG);
        if (r == p->pid) break;
        if (i == 99 || r < 0) {
            kill(-p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            break;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    reaped(p);
    return st;
}

bool bench_proc_wait(struct bench_proc *p, double deadline, int *status)
{
    if (isinf(deadline)) {
        while (waitpid(p->pid, status, 0) < 0 && errno == EINTR) {
        }
        reaped(p);
        return true;
    }
    while (bench_now() < deadline) {
        if (waitpid(p->pid, status, WNOHANG) == p->pid) {
            reaped(p);
            return true;
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    bench_proc_stop(p);
    return false;
}

bool bench_proc_collect(struct bench_proc *p, char *buf, size_t len, double deadline, int *status)
{
    buf[0] = '\0';
    if (!bench_proc_read(p, buf, len, deadline)) {
        *status = bench_proc_stop(p);
        return false;
    }
    return bench_proc_wait(p, deadline, status);
}

int bench_proc_run(char *const *argv, bool as_pg, char *log, size_t len)
{
    struct bench_proc p;
    const struct bench_proc_opts o = {.capture = true, .fd3 = -1, .as_pg = as_pg};
    if (bench_proc_start(&p, argv, &o, log, len) < 0) return -1;
    int st;
    bool ok = bench_proc_collect(&p, log, len, bench_now() + 300, &st);
    return ok && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- ports and programs ----------------------------------------------------------------- */

bool bench_port_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0) close(fd);
    return ok;
}

bool bench_port_wait(struct bench_proc *p, int port)
{
    double deadline = bench_now() + 20;
    while (bench_now() < deadline) {
        if (bench_port_open(port)) return true;
        int st;
        if (p && waitpid(p->pid, &st, WNOHANG) == p->pid) {
            kill(-p->pid, SIGKILL);
            live_set(p->pid, 0);
            p->pid = 0;
            return false;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return false;
}

int bench_port_free(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &l) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

const char *bench_program_find(const char *const *paths)
{
    for (int i = 0; paths[i]; i++)
        if (access(paths[i], X_OK) == 0) return paths[i];
    return NULL;
}
