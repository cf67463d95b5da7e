/*
 * The per-fd state against the kernel's view of the fd, one defect each:
 *  - zero_timeout: after a short read, a read with timeout 0 makes its
 *    system call (nobody polls, so no event can tell it that data came);
 *  - peek: a short MSG_PEEK leaves the data in the socket, and a UNIX
 *    socket stops a read at passed fds: the next read must not wait for an
 *    event that already came;
 *  - connect_close: usched_close ends a usched_connect that retries a full
 *    UNIX backlog;
 *  - connect_nowait: connect with timeout 0 says -EINPROGRESS, as
 *    connect(2), and usched_poll_fd(POLLOUT) then SO_ERROR give the result;
 *  - child: a process forked after a pipe write to a closed reader (which
 *    blocked SIGPIPE on the worker) has SIGPIPE unblocked and the soft
 *    RLIMIT_NOFILE the program started with;
 *  - foreign: a pipe and a socket pair usched did not create keep their
 *    flags (no O_NONBLOCK on a shared file description), and a read on them
 *    waits without blocking the worker.
 * One worker, so that a fiber blocking its thread would stop the test.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "io_internal.h"
#include "io_test.h"

static usched_t *s;
static struct rlimit nofile0;

static void zero_timeout(void)
{
    int a, b;
    io_tcp_pair(&a, &b);
    char buf[100];
    ASSERT_EQ(usched_write(a, "0123456789", 10, USCHED_FOREVER), 10);
    ASSERT_EQ(usched_read(b, buf, sizeof buf, USCHED_FOREVER), 10); /* short: drained */
    ASSERT_EQ(usched_write(a, "abcdefghij", 10, USCHED_FOREVER), 10);
    ASSERT_EQ(usched_poll_fd(b, POLLIN, USCHED_FOREVER) & POLLIN, POLLIN);
    ASSERT_EQ(usched_read(b, buf, sizeof buf, 0), 10);
    ASSERT_EQ(memcmp(buf, "abcdefghij", 10), 0);
    ASSERT_OK(usched_close(a));
    ASSERT_OK(usched_close(b));
    printf("zero_timeout: ok\n");
}

struct feed {
    int fd, wait_fd;
    int pass_fd; /* >= 0: send it with the first message (SCM_RIGHTS) */
};

/* Writes once the reader waits on wait_fd: its wake-up is the event. */
static void feeder(void *arg)
{
    struct feed *f = arg;
    while (io_waiters(f->wait_fd, IO_RD) < 1) usched_yield();
    if (f->pass_fd >= 0) {
        char cbuf[CMSG_SPACE(sizeof(int))];
        memset(cbuf, 0, sizeof cbuf);
        struct iovec v = {"abc", 3};
        struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = cbuf,
                           .msg_controllen = sizeof cbuf};
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &f->pass_fd, sizeof(int));
        ASSERT_EQ(sendmsg(f->fd, &m, 0), 3);
        ASSERT_EQ(send(f->fd, "defgh", 5, 0), 5);
    } else {
        ASSERT_EQ(usched_write(f->fd, "0123456789", 10, USCHED_FOREVER), 10);
    }
}

static void peek(void)
{
    int a, b;
    io_tcp_pair(&a, &b);
    char buf[100];
    struct feed f = {a, b, -1};
    usched_task_t *t;
    ASSERT_OK(usched_spawn(s, &t, feeder, &f));
    ASSERT_EQ(usched_recv(b, buf, sizeof buf, MSG_PEEK, USCHED_FOREVER), 10);
    ASSERT_OK(usched_join(t));
    ASSERT_EQ(usched_read(b, buf, sizeof buf, 2000000000ull), 10); /* the data is there */
    ASSERT_EQ(memcmp(buf, "0123456789", 10), 0);
    ASSERT_OK(usched_close(a));
    ASSERT_OK(usched_close(b));
    /* A UNIX stream stops a read where fds were passed. */
    int sv[2], p[2];
    ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    ASSERT_OK(pipe(p));
    struct feed g = {sv[1], sv[0], p[0]};
    ASSERT_OK(usched_spawn(s, &t, feeder, &g));
    ASSERT_EQ(usched_read(sv[0], buf, sizeof buf, USCHED_FOREVER), 3);
    ASSERT_OK(usched_join(t));
    ASSERT_EQ(usched_read(sv[0], buf, sizeof buf, 2000000000ull), 5);
    ASSERT_EQ(memcmp(buf, "defgh", 5), 0);
    ASSERT_OK(usched_close(sv[0]));
    ASSERT_OK(usched_close(sv[1]));
    close(p[0]);
    close(p[1]);
    printf("peek: ok\n");
}

static int conn_fd;
static _Atomic int conn_rc = 1;

static void connector(void *arg)
{
    struct sockaddr_un *un = arg;
    atomic_store(&conn_rc, usched_connect(conn_fd, (struct sockaddr *)un, sizeof *un, USCHED_FOREVER));
}

static void connect_close(void)
{
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    snprintf(un.sun_path, sizeof un.sun_path, "/tmp/usched-fdstate-%d", (int)getpid());
    unlink(un.sun_path);
    int l = usched_socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_OK(l);
    ASSERT_OK(bind(l, (struct sockaddr *)&un, sizeof un));
    ASSERT_OK(listen(l, 0));
    /* Fill the backlog: connect(2) says EAGAIN once it is full. */
    int fill[64], nfill = 0, rc;
    do {
        ASSERT_LT(nfill, 64);
        fill[nfill] = usched_socket(AF_UNIX, SOCK_STREAM, 0);
        ASSERT_OK(fill[nfill]);
        rc = usched_connect(fill[nfill], (struct sockaddr *)&un, sizeof un, 0);
        nfill++;
    } while (rc == 0);
    ASSERT_EQ(rc, -EAGAIN); /* a full UNIX backlog, as connect(2) says it */
    conn_fd = usched_socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_OK(conn_fd);
    usched_task_t *t;
    ASSERT_OK(usched_spawn(s, &t, connector, &un));
    struct usched__pd *pd = usched__pd_get(conn_fd);
    while (!atomic_load(&pd->refs)) usched_yield(); /* in its retry loop */
    ASSERT_OK(usched_close(conn_fd)); /* returns without an accept */
    ASSERT_OK(usched_join(t));
    ASSERT_EQ(atomic_load(&conn_rc), -EBADF);
    for (int i = 0; i < nfill; i++) ASSERT_OK(usched_close(fill[i]));
    ASSERT_OK(usched_close(l));
    unlink(un.sun_path);
    printf("connect_close: ok\n");
}

static void connect_nowait(void)
{
    struct sockaddr_in addr;
    int l = io_listener(&addr, 4);
    int fd = usched_socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_OK(fd);
    int rc = usched_connect(fd, (struct sockaddr *)&addr, sizeof addr, 0);
    ASSERT(rc == 0 || rc == -EINPROGRESS);
    if (rc == -EINPROGRESS) {
        ASSERT_EQ(usched_poll_fd(fd, POLLOUT, USCHED_FOREVER) & POLLOUT, POLLOUT);
        int err = -1;
        socklen_t len = sizeof err;
        ASSERT_OK(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len));
        ASSERT_EQ(err, 0);
    }
    /* Again, as connect(2): 0 (Linux, the first time after the handshake)
     * or -EISCONN. */
    int again = usched_connect(fd, (struct sockaddr *)&addr, sizeof addr, 0);
    ASSERT(again == 0 || again == -EISCONN);
    int c = usched_accept(l, NULL, NULL, USCHED_FOREVER);
    ASSERT_OK(c);
    ASSERT_EQ(usched_write(fd, "x", 1, USCHED_FOREVER), 1);
    char b;
    ASSERT_EQ(usched_read(c, &b, 1, USCHED_FOREVER), 1);
    ASSERT_OK(usched_close(c));
    ASSERT_OK(usched_close(fd));
    ASSERT_OK(usched_close(l));
    printf("connect_nowait: rc %d, ok\n", rc);
}

static void child(void)
{
    int p[2];
    ASSERT_OK(pipe(p));
    ASSERT_OK(usched_close(p[0]));
    ASSERT_EQ(usched_write(p[1], "x", 1, USCHED_FOREVER), -EPIPE);
    ASSERT_OK(usched_close(p[1]));
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        sigset_t cur;
        struct rlimit rl;
        pthread_sigmask(SIG_SETMASK, NULL, &cur);
        getrlimit(RLIMIT_NOFILE, &rl);
        int bad = (sigismember(&cur, SIGPIPE) ? 1 : 0) | (rl.rlim_cur != nofile0.rlim_cur ? 2 : 0);
        _exit(bad);
    }
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT(WIFEXITED(st));
    if (WEXITSTATUS(st) & 1) TEST_FAIL_("the child inherited SIGPIPE blocked");
    if (WEXITSTATUS(st) & 2) TEST_FAIL_("the child inherited the raised RLIMIT_NOFILE");
    printf("child: ok\n");
}

struct late {
    int rfd, wfd;
};

/* Writes once the fiber waits on rfd (a waiter queued): a read that had
 * blocked the worker thread would never get here. */
static void *late_writer(void *arg)
{
    struct late *l = arg;
    while (io_waiters(l->rfd, IO_RD) < 1) usleep(1000);
    ASSERT_EQ(write(l->wfd, "late", 4), 4);
    return NULL;
}

static void foreign(void)
{
    int p[2], sv[2];
    ASSERT_OK(pipe(p));
    ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    int fds[4] = {p[0], p[1], sv[0], sv[1]};
    int fl[4];
    for (int i = 0; i < 4; i++) fl[i] = fcntl(fds[i], F_GETFL);
    char b[16];
    for (int k = 0; k < 2; k++) {
        int rfd = k ? sv[0] : p[0], wfd = k ? sv[1] : p[1];
        ASSERT_EQ(usched_read(rfd, b, sizeof b, 0), -EAGAIN);
        ASSERT_EQ(usched_read(rfd, b, sizeof b, 1000000), -ETIMEDOUT);
        pthread_t th;
        struct late l = {rfd, wfd};
        pthread_create(&th, NULL, late_writer, &l);
        ASSERT_EQ(usched_read(rfd, b, sizeof b, USCHED_FOREVER), 4);
        pthread_join(th, NULL);
        ASSERT_EQ(usched_write(wfd, "more", 4, USCHED_FOREVER), 4);
        ASSERT_EQ(usched_read(rfd, b, sizeof b, USCHED_FOREVER), 4);
        /* Fill it: the write that does not fit waits, with a timeout. */
        static char big[1 << 20];
        ssize_t n = usched_write(wfd, big, sizeof big, 20000000);
        ASSERT(n > 0 && n < (ssize_t)sizeof big);
        ASSERT_EQ(usched_write(wfd, big, 1, 0), -EAGAIN);
    }
    for (int i = 0; i < 4; i++) {
        ASSERT_EQ(fcntl(fds[i], F_GETFL), fl[i]);
        ASSERT_EQ(fl[i] & O_NONBLOCK, 0);
    }
    for (int i = 0; i < 4; i++) ASSERT_OK(usched_close(fds[i]));
    printf("foreign: ok, flags unchanged\n");
}

static _Atomic long progress;

#define STEP(f) {#f, f}
static const struct {
    const char *name;
    void (*fn)(void);
} steps[] = {STEP(zero_timeout), STEP(peek), STEP(connect_close), STEP(connect_nowait), STEP(child),
             STEP(foreign)};

/* arg: one step's name, or NULL for all. */
static void run(void *arg)
{
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        if (arg && strcmp(arg, steps[i].name) != 0) continue;
        steps[i].fn();
        atomic_fetch_add(&progress, 1);
    }
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    /* A soft limit below the hard one, which usched_start raises. */
    ASSERT_OK(getrlimit(RLIMIT_NOFILE, &nofile0));
    if (nofile0.rlim_cur == nofile0.rlim_max && nofile0.rlim_max > 64) {
        nofile0.rlim_cur = nofile0.rlim_max / 2;
        ASSERT_OK(setrlimit(RLIMIT_NOFILE, &nofile0));
    }
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "cpus", "0"));
    ASSERT_OK(usched_start(s));
    struct io_watchdog wd;
    io_watchdog_start(&wd, &progress, 30, "fdstate", s);
    usched_task_t *t;
    ASSERT_OK(usched_spawn(s, &t, run, argc > 1 ? argv[1] : NULL));
    ASSERT_OK(usched_join(t));
    io_watchdog_stop(&wd);
    ASSERT_OK(usched_destroy(s));
    printf("ok\n");
    return 0;
}
