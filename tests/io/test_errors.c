/*
 * Errors and ends of streams, from a fiber and from an outside thread: EOF,
 * half-close, peer reset (-ECONNRESET), -EPIPE on a closed peer without a
 * signal (SIGPIPE keeps its default action, which would kill the test),
 * -EBADF, -ENOTSOCK, -EINVAL for NULL buffers; and regular files, which
 * go through the offload pool.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "io_test.h"

static usched_t *s;

static void check_all(const char *who)
{
    char b[64];
    int sv[2];
    /* EOF */
    ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    ASSERT_EQ(usched_write(sv[1], "hello", 5, USCHED_FOREVER), 5);
    ASSERT_OK(usched_close(sv[1]));
    ASSERT_EQ(usched_read(sv[0], b, sizeof b, USCHED_FOREVER), 5);
    ASSERT_EQ(usched_read(sv[0], b, sizeof b, USCHED_FOREVER), 0);
    ASSERT_EQ(usched_read(sv[0], b, sizeof b, USCHED_FOREVER), 0);
    /* EPIPE without a signal, socket */
    ASSERT_EQ(usched_write(sv[0], "x", 1, USCHED_FOREVER), -EPIPE);
    ASSERT_EQ(usched_send(sv[0], "x", 1, 0, USCHED_FOREVER), -EPIPE);
    ASSERT_OK(usched_close(sv[0]));
    /* EPIPE without a signal, pipe */
    int p[2];
    ASSERT_OK(pipe(p));
    ASSERT_OK(usched_close(p[0]));
    ASSERT_EQ(usched_write(p[1], "x", 1, USCHED_FOREVER), -EPIPE);
    struct iovec v = {"x", 1};
    ASSERT_EQ(usched_writev(p[1], &v, 1, USCHED_FOREVER), -EPIPE);
    ASSERT_OK(usched_close(p[1]));
    /* half-close over TCP: the peer reads EOF and can still answer */
    int a, c;
    io_tcp_pair(&a, &c);
    ASSERT_OK(shutdown(a, SHUT_WR));
    ASSERT_EQ(usched_read(c, b, sizeof b, USCHED_FOREVER), 0);
    ASSERT_EQ(usched_write(c, "late", 4, USCHED_FOREVER), 4);
    ASSERT_EQ(usched_read(a, b, sizeof b, USCHED_FOREVER), 4);
    ASSERT_OK(usched_close(c));
    ASSERT_EQ(usched_read(a, b, sizeof b, USCHED_FOREVER), 0);
    ASSERT_OK(usched_close(a));
    /* peer reset */
    io_tcp_pair(&a, &c);
    struct linger lg = {1, 0};
    ASSERT_OK(setsockopt(a, SOL_SOCKET, SO_LINGER, &lg, sizeof lg));
    ASSERT_OK(usched_close(a)); /* RST */
    ASSERT_EQ(usched_read(c, b, sizeof b, USCHED_FOREVER), -ECONNRESET);
    ASSERT_OK(usched_close(c));
    /* EBADF */
    ASSERT_EQ(usched_read(-1, b, 1, 0), -EBADF);
    ASSERT_EQ(usched_write(-5, b, 1, USCHED_FOREVER), -EBADF);
    int spare = 19000; /* a number nothing here opens */
    ASSERT(fcntl(spare, F_GETFD) < 0);
    ASSERT_EQ(usched_read(spare, b, 1, USCHED_FOREVER), -EBADF);
    ASSERT_EQ(usched_accept(spare, NULL, NULL, USCHED_FOREVER), -EBADF);
    /* ENOTSOCK */
    ASSERT_OK(pipe(p));
    ASSERT_EQ(usched_recv(p[0], b, 1, 0, 0), -ENOTSOCK);
    ASSERT_EQ(usched_send(p[1], b, 1, 0, 0), -ENOTSOCK);
    ASSERT_EQ(usched_accept(p[0], NULL, NULL, 0), -ENOTSOCK);
    /* EINVAL */
    ASSERT_EQ(usched_read(p[0], NULL, 10, 0), -EINVAL);
    ASSERT_STR_CONTAINS(usched_last_error(), "NULL");
    ASSERT_EQ(usched_write(p[1], NULL, 10, 0), -EINVAL);
    ASSERT_EQ(usched_recv(p[0], NULL, 1, 0, 0), -EINVAL);
    ASSERT_EQ(usched_send(p[1], NULL, 1, 0, 0), -EINVAL);
    ASSERT_EQ(usched_readv(p[0], NULL, 2, 0), -EINVAL);
    ASSERT_EQ(usched_writev(p[1], NULL, 2, 0), -EINVAL);
    ASSERT_EQ(usched_readv(p[0], &v, -1, 0), -EINVAL);
    ASSERT_EQ(usched_poll_fd(p[0], 0, 0), -EINVAL);
    struct sockaddr_in sa;
    ASSERT_EQ(usched_accept(p[0], (struct sockaddr *)&sa, NULL, 0), -EINVAL);
    ASSERT_EQ(usched_connect(p[0], NULL, 0, 0), -EINVAL);
    ASSERT_EQ(usched_read(p[0], b, 0, 0), 0); /* zero length is fine */
    ASSERT_OK(usched_close(p[0]));
    ASSERT_OK(usched_close(p[1]));
    /* connection refused: a port that was just free */
    int l = io_listener(&sa, 1);
    ASSERT_OK(usched_close(l));
    int d = usched_socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_OK(d);
    ASSERT_EQ(usched_connect(d, (struct sockaddr *)&sa, sizeof sa, USCHED_FOREVER), -ECONNREFUSED);
    ASSERT_OK(usched_close(d));
    /* a regular file: written and read through the offload pool */
    char path[] = "/tmp/usched-io-test-XXXXXX";
    int f = mkstemp(path);
    ASSERT_OK(f);
    unlink(path);
    static char data[100000];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (char)(i * 7);
    ASSERT_EQ(usched_write(f, data, sizeof data, USCHED_FOREVER), (long)sizeof data);
    ASSERT_EQ(lseek(f, 0, SEEK_SET), 0);
    static char back[100000];
    size_t got = 0;
    while (got < sizeof back) {
        ssize_t n = usched_read(f, back + got, sizeof back - got, USCHED_FOREVER);
        ASSERT_GT(n, 0);
        got += (size_t)n;
    }
    ASSERT_EQ(memcmp(data, back, sizeof data), 0);
    ASSERT_EQ(usched_read(f, back, 10, USCHED_FOREVER), 0);
    ASSERT_EQ(usched_poll_fd(f, POLLIN | POLLOUT, 0), POLLIN | POLLOUT); /* files are always ready */
    ASSERT_OK(usched_close(f));
    printf("%s: ok\n", who);
}

static void fiber(void *arg)
{
    check_all((const char *)arg);
}

static void *thread(void *arg)
{
    check_all((const char *)arg);
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    signal(SIGPIPE, SIG_DFL);
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_start(s));
    usched_task_t *t;
    ASSERT_OK(usched_spawn(s, &t, fiber, "fiber"));
    ASSERT_OK(usched_join(t));
    ASSERT_GT(io_stat(s, "offloads"), 0); /* the file went through the pool */
    pthread_t th;
    pthread_create(&th, NULL, thread, "outside thread");
    pthread_join(th, NULL);
    ASSERT_OK(usched_destroy(s));
    /* With no scheduler at all. */
    check_all("no scheduler");
    printf("ok\n");
    return 0;
}
