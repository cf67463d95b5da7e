/*
 * Running out, in src/io:
 *  - memory: every allocation of the I/O layer (the chunk of per-fd state a
 *    new fd number needs, the poller, its per-CPU buffers) fails in turn
 *    (src/base/fault.h): the first call on the fd returns -ENOMEM and
 *    leaves no half-made state, and the same call then works;
 *  - descriptors: with RLIMIT_NOFILE lowered and every fd in use, the
 *    poller cannot be created (-EMFILE, with the reason), usched_socket
 *    and usched_accept refuse with -EMFILE, nothing crashes or waits, and
 *    the connection that could not be accepted is accepted, with its data,
 *    once an fd is free.
 */
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "base/fault.h"
#include "io/io_impl.h"
#include "io_test.h"

#define MAX_N 1000 /* no first call allocates this often */

/* The first fd number of chunk k of the per-fd state (fd.c: 1024 a chunk). */
#define CHUNK_FD(k) ((k) * 1024 + 1)

struct armed {
    int fd;
    long n;
    long pending;
    int rc;
};

/* The first I/O call of a new scheduler on an fd in an unused chunk, with
 * the n-th allocation failing. */
static void armed_call(void *arg)
{
    struct armed *a = arg;
    char b;
    usched__fault_arm(a->n);
    a->rc = (int)usched_read(a->fd, &b, 1, 0);
    a->pending = usched__fault_pending();
    usched__fault_arm(0);
    if (a->rc == -ENOMEM) {
        /* Nothing half-made: the same call works now. */
        ASSERT_EQ(usched_read(a->fd, &b, 1, 0), -EAGAIN);
    }
}

static void echo_once(void *arg)
{
    int *sv = arg;
    char b = 0;
    ASSERT_EQ(usched_write(sv[1], "m", 1, USCHED_FOREVER), 1);
    ASSERT_EQ(usched_read(sv[0], &b, 1, USCHED_FOREVER), 1);
    ASSERT_EQ(b, 'm');
}

static void faults(void)
{
    long n;
    int k = 1, failed = 0;
    for (n = 1; n < MAX_N; n++, k++) {
        int sv[2];
        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv));
        /* A number in a chunk no fd used yet. */
        ASSERT_EQ(dup2(sv[0], CHUNK_FD(k)), CHUNK_FD(k));
        close(sv[0]);
        sv[0] = CHUNK_FD(k);
        usched_t *s;
        ASSERT_OK(usched_create(&s));
        ASSERT_OK(usched_start(s));
        struct armed a = {.fd = sv[0], .n = n};
        usched_task_t *t;
        ASSERT_OK(usched_spawn(s, &t, armed_call, &a));
        ASSERT_OK(usched_join(t));
        if (a.rc != -EAGAIN && a.rc != -ENOMEM)
            TEST_FAIL_("first read, allocation %ld failing: %d (%s), not -ENOMEM", n, a.rc,
                       usched_strerror(a.rc));
        failed += a.rc == -ENOMEM;
        /* The fd and the scheduler work after it. */
        ASSERT_OK(usched_spawn(s, &t, echo_once, sv));
        ASSERT_OK(usched_join(t));
        ASSERT_OK(usched_close(sv[0]));
        ASSERT_OK(usched_close(sv[1]));
        ASSERT_OK(usched_destroy(s));
        if (a.pending > 0) {
            ASSERT_EQ(a.rc, -EAGAIN); /* the failure was not reached: it worked */
            break;
        }
    }
    ASSERT_LT(n, MAX_N);
    ASSERT_EQ(failed, n - 1);
    printf("faults: the first call makes %ld allocation(s), each failure gives -ENOMEM\n", n - 1);
}

static int lst, cli;
static struct sockaddr_in laddr;

/* Takes every free fd; returns how many. */
static int fill(int *fds, int max)
{
    int n = 0;
    while (n < max) {
        int fd = dup(lst);
        if (fd < 0) {
            ASSERT_EQ(errno, EMFILE);
            break;
        }
        fds[n++] = fd;
    }
    ASSERT_LT(n, max);
    return n;
}

static void exhausted(void *arg)
{
    (void)arg;
    static int fds[4096];
    char b[16];
    int n = fill(fds, 4096);
    /* The poller (an epoll fd, an eventfd and a timerfd per set: one, or
     * one per CPU) is made on the first wait. */
    int need = 3 * (io_percpu(usched_self()) ? usched_self()->ncpus : 1);
    ASSERT_LT(need, n);
    ASSERT_EQ(usched_poll_fd(lst, POLLIN, 0), -EMFILE);
    ASSERT_STR_CONTAINS(usched_last_error(), "poller");
    ASSERT_EQ(usched_poll_fd(lst, POLLIN, 1000000), -EMFILE);
    close(fds[--n]); /* one short: still refused, and nothing leaks */
    ASSERT_EQ(usched_poll_fd(lst, POLLIN, 0), -EMFILE);
    for (int i = 1; i < need; i++) close(fds[--n]);
    ASSERT_EQ(usched_poll_fd(lst, POLLIN, 0), -EAGAIN); /* made now */
    n += fill(fds + n, 4096 - n);
    ASSERT_EQ(usched_socket(AF_INET, SOCK_STREAM, 0), -EMFILE);
    /* A connection waits in the backlog: accept refuses it, and keeps it. */
    ASSERT_OK(usched_connect(cli, (struct sockaddr *)&laddr, sizeof laddr, USCHED_FOREVER));
    ASSERT_EQ(usched_write(cli, "hello", 5, USCHED_FOREVER), 5);
    ASSERT_EQ(usched_accept(lst, NULL, NULL, 0), -EMFILE);
    ASSERT_EQ(usched_accept(lst, NULL, NULL, USCHED_FOREVER), -EMFILE);
    close(fds[--n]);
    int c = usched_accept(lst, NULL, NULL, USCHED_FOREVER);
    ASSERT_OK(c);
    ASSERT_EQ(usched_read(c, b, sizeof b, USCHED_FOREVER), 5);
    ASSERT_EQ(memcmp(b, "hello", 5), 0);
    ASSERT_EQ(usched_write(c, "bye", 3, USCHED_FOREVER), 3);
    ASSERT_EQ(usched_read(cli, b, sizeof b, USCHED_FOREVER), 3);
    ASSERT_OK(usched_close(c));
    while (n > 0) close(fds[--n]);
    printf("exhausted: poller, socket and accept refused with -EMFILE; the connection kept\n");
}

static void limits(void)
{
    /* The scheduler, the listener and the client first; then a limit just
     * above the fds open, hard too, so that usched_start cannot raise it. */
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_start(s));
    lst = io_listener(&laddr, 8);
    cli = usched_socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_OK(cli);
    int top = fcntl(lst, F_DUPFD, 0);
    ASSERT_OK(top);
    close(top);
    struct rlimit rl = {(rlim_t)top + 64, (rlim_t)top + 64};
    ASSERT_OK(setrlimit(RLIMIT_NOFILE, &rl));
    usched_task_t *t;
    ASSERT_OK(usched_spawn(s, &t, exhausted, NULL));
    ASSERT_OK(usched_join(t));
    ASSERT_OK(usched_close(cli));
    ASSERT_OK(usched_close(lst));
    ASSERT_OK(usched_destroy(s));
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    faults();
    limits(); /* last: it lowers the hard limit for good */
    printf("ok\n");
    return 0;
}
