/*
 * A TCP echo server: one fiber accepts, one fiber per connection echoes.
 *
 * Each connection's fiber reads and writes as if the socket blocked: a read
 * with nothing to read parks the fiber, and its CPU runs other fibers until
 * the poller sees the socket ready. Sockets used with usched's calls are
 * closed with usched_close.
 *
 * Without --serve the program checks itself: it serves CLIENTS connections
 * from client fibers of the same scheduler, each sending MESSAGES messages of
 * 1 to 4,096 bytes and checking every echo, and exits non-zero on a wrong one.
 * With --serve it echoes on 127.0.0.1:PORT until it is killed (try any TCP
 * client, such as `nc 127.0.0.1 PORT`).
 *
 *   cc echo_server.c $(pkg-config --cflags --libs usched) -o echo_server
 *   ./echo_server [CLIENTS [MESSAGES]]
 *   ./echo_server --serve PORT
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <usched.h>

#define MAX_MSG 4096

/* ---- the server ---------------------------------------------------------- */

static void echo_conn(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[MAX_MSG];
    for (;;) {
        ssize_t n = usched_read(fd, buf, sizeof buf, USCHED_FOREVER);
        if (n <= 0) break; /* 0: the peer closed; < 0: -ECONNRESET and the like */
        if (usched_write(fd, buf, (size_t)n, USCHED_FOREVER) != n) break;
    }
    usched_close(fd);
}

struct acceptor {
    int lfd;
    long limit;     /* connections to accept, -1: no limit (--serve) */
    atomic_int err; /* the first error that stopped it, as a negative errno */
};

static void accept_loop(void *arg)
{
    struct acceptor *a = arg;
    for (long i = 0; a->limit < 0 || i < a->limit; i++) {
        int c = usched_accept(a->lfd, NULL, NULL, USCHED_FOREVER);
        if (c == -ECONNABORTED || c == -EMFILE || c == -ENFILE) {
            /* The connection is gone, or no fd for it now: go on accepting,
             * after a pause when out of fds (a close may free one). */
            fprintf(stderr, "echo_server: accept: %s\n", usched_strerror(c));
            if (c != -ECONNABORTED) usched_sleep_ns(10 * 1000 * 1000);
            i--;
            continue;
        }
        if (c < 0) {
            atomic_store(&a->err, c);
            return;
        }
        /* detached: the connection's fiber ends when its peer closes */
        int r = usched_spawn(usched_self(), NULL, echo_conn, (void *)(intptr_t)c);
        if (r < 0) {
            fprintf(stderr, "echo_server: spawn: %s\n", usched_strerror(r));
            usched_close(c);
        }
    }
}

/* A listening TCP socket on 127.0.0.1:port (0: any free port); its port in
 * *bound. A negative errno, with a message, on failure. */
static int listen_on(int port, int *bound)
{
    int fd = usched_socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        fprintf(stderr, "echo_server: socket: %s\n", usched_strerror(fd));
        return fd;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 128) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        int e = -errno;
        fprintf(stderr, "echo_server: cannot listen on 127.0.0.1:%d: %s\n", port, usched_strerror(e));
        usched_close(fd);
        return e;
    }
    *bound = ntohs(sa.sin_port);
    return fd;
}

/* ---- the self-check's clients -------------------------------------------- */

struct client {
    int port, id;
    long messages;
    long wrong; /* echoes that differed from what was sent, or failed calls */
};

static unsigned char pattern(int id, long i, size_t k)
{
    return (unsigned char)(id * 131 + i * 31 + (long)k * 7);
}

static void client(void *arg)
{
    struct client *c = arg;
    unsigned char out[MAX_MSG], back[MAX_MSG];
    int fd = usched_socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c->port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int r = fd < 0 ? fd : usched_connect(fd, (struct sockaddr *)&sa, sizeof sa, USCHED_FOREVER);
    if (r < 0) {
        fprintf(stderr, "echo_server: client %d: connect: %s\n", c->id, usched_strerror(r));
        c->wrong = c->messages;
        if (fd >= 0) usched_close(fd);
        return;
    }
    for (long i = 0; i < c->messages; i++) {
        size_t len = 1 + (size_t)((c->id * 977 + i * 389) % MAX_MSG);
        for (size_t k = 0; k < len; k++) out[k] = pattern(c->id, i, k);
        if (usched_write(fd, out, len, USCHED_FOREVER) != (ssize_t)len) {
            c->wrong += c->messages - i;
            break;
        }
        size_t got = 0; /* TCP may hand the echo back in pieces */
        while (got < len) {
            ssize_t n = usched_read(fd, back + got, len - got, USCHED_FOREVER);
            if (n <= 0) break;
            got += (size_t)n;
        }
        if (got < len) {
            fprintf(stderr, "echo_server: client %d: the echo of message %ld stopped at %zu of %zu bytes\n",
                    c->id, i, got, len);
            c->wrong += c->messages - i;
            break;
        }
        if (memcmp(out, back, len) != 0) c->wrong++;
    }
    usched_close(fd);
}

/* ---- main ---------------------------------------------------------------- */

/* A whole decimal number in [lo, hi], else -1 with a message naming it. */
static long number(const char *what, const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "echo_server: %s '%s' must be a number from %ld to %ld\n", what, s, lo, hi);
        return -1;
    }
    return v;
}

static int usage(void)
{
    fprintf(stderr, "usage: echo_server [CLIENTS [MESSAGES]]   (check itself)\n"
                    "       echo_server --serve PORT           (echo on 127.0.0.1:PORT)\n");
    return 2;
}

int main(int argc, char **argv)
{
    int serve = argc > 1 && strcmp(argv[1], "--serve") == 0;
    long port = 0, clients = 16, messages = 200;
    if (serve) {
        if (argc != 3) return usage();
        if ((port = number("PORT", argv[2], 1, 65535)) < 0) return 2;
    } else {
        if (argc > 3 || (argc > 1 && argv[1][0] == '-')) return usage();
        if (argc > 1 && (clients = number("CLIENTS", argv[1], 1, 1000)) < 0) return 2;
        if (argc > 2 && (messages = number("MESSAGES", argv[2], 1, 1000000)) < 0) return 2;
    }

    usched_t *s;
    int r = usched_create(&s);
    if (r == 0) r = usched_start(s);
    if (r < 0) {
        fprintf(stderr, "echo_server: %s: %s\n", usched_strerror(r), usched_last_error());
        return 1;
    }
    int bound = 0;
    int lfd = listen_on((int)port, &bound);
    if (lfd < 0) {
        usched_destroy(s);
        return 1;
    }
    struct acceptor a = {.lfd = lfd, .limit = serve ? -1 : clients};
    usched_task_t *acc;
    if ((r = usched_spawn(s, &acc, accept_loop, &a)) < 0) {
        fprintf(stderr, "echo_server: spawn: %s\n", usched_strerror(r));
        return 1;
    }
    if (serve) {
        printf("echo_server: echoing on 127.0.0.1:%d (Ctrl-C stops it)\n", bound);
        fflush(stdout);
        usched_join(acc); /* returns only if accepting fails */
        fprintf(stderr, "echo_server: accept: %s\n", usched_strerror(atomic_load(&a.err)));
        return 1;
    }

    struct client *cs = calloc((size_t)clients, sizeof *cs);
    usched_task_t **ts = calloc((size_t)clients, sizeof *ts);
    if (!cs || !ts) {
        fprintf(stderr, "echo_server: out of memory\n");
        return 1;
    }
    long started = 0;
    for (long i = 0; i < clients; i++) {
        cs[i] = (struct client){.port = bound, .id = (int)i, .messages = messages};
        if ((r = usched_spawn(s, &ts[i], client, &cs[i])) < 0) {
            fprintf(stderr, "echo_server: spawn of client %ld: %s\n", i, usched_strerror(r));
            break;
        }
        started++;
    }
    long wrong = 0;
    for (long i = 0; i < started; i++) {
        usched_join(ts[i]);
        wrong += cs[i].wrong;
    }
    wrong += (clients - started) * messages;
    /* Closing the listening socket wakes the acceptor with -EBADF if it still
     * waits for a client that never connected (counted wrong above). */
    usched_close(lfd);
    usched_join(acc);
    int e = atomic_load(&a.err);
    if (e && e != -EBADF) {
        fprintf(stderr, "echo_server: accept: %s\n", usched_strerror(e));
        wrong++;
    }
    usched_wait(s); /* the connections' fibers end as their clients close */
    usched_destroy(s);
    free(cs);
    free(ts);
    printf("%ld clients x %ld messages echoed on 127.0.0.1:%d: %s\n", clients, messages, bound,
           wrong ? "WRONG" : "correct");
    return wrong ? 1 : 0;
}
