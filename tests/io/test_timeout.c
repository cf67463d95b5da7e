/*
 * Timeouts of the I/O calls: they fire (never before their time), 0 only
 * tries, and a timeout racing with data never loses the data. From fibers
 * and from an outside thread.
 *
 * Far deadlines (50 ms or more: poller.c, io_park, left to the set's
 * timerfd), with every fiber on CPU 0:
 *   earlier   A waits 20 s, then B 100 ms: B's timeout still fires at its
 *             time, not at A's (the timerfd is set earlier again), and B
 *             then writes to A, who reads it long before its own timeout;
 *   later     D waits 500 ms and gets data before then, E waits 800 ms: the
 *             timerfd set for D ends one poll early, and E still times
 *             out, never before its time.
 * io_poller=percpu: CPU 0 blocks in its own set, so the timerfd is used
 * (io_timer_far, io_timer_sets), when the descriptors are homed there (not
 * on a CPU that CPU 0 is packed onto); shared: whichever CPU holds the
 * role, with its own deadline.
 */
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "io_test.h"
#include "io_internal.h"

static usched_t *s;

/* A read of fd that times out after ms, never before. */
static void read_times_out(const char *who, int fd, int ms)
{
    char c;
    double t0 = test_now();
    ASSERT_EQ(usched_read(fd, &c, 1, (uint64_t)ms * 1000000), -ETIMEDOUT);
    double dt = test_now() - t0;
    printf("%s timed out after %.2f ms (%d ms asked)\n", who, dt * 1e3, ms);
    ASSERT(dt >= ms / 1e3);
}

static void check_fires(const char *who)
{
    int sv[2];
    ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    char b[8];
    /* 0 only tries */
    ASSERT_EQ(usched_read(sv[0], b, sizeof b, 0), -EAGAIN);
    ASSERT_EQ(usched_poll_fd(sv[0], POLLIN, 0), -EAGAIN);
    const uint64_t ms = 1000000;
    char what[64];
    snprintf(what, sizeof what, "%s: read", who);
    read_times_out(what, sv[0], 30);
    double t0 = test_now();
    ASSERT_EQ(usched_poll_fd(sv[0], POLLIN, 20 * ms), -ETIMEDOUT);
    ASSERT(test_now() - t0 >= 0.020);
    /* A full socket: write moves what fits, then times out with the count. */
    char big[4096] = {0};
    long put = 0;
    for (;;) {
        ssize_t n = usched_write(sv[0], big, sizeof big, 0);
        if (n == -EAGAIN) break;
        ASSERT_GT(n, 0);
        put += n;
    }
    ASSERT_GT(put, 0);
    ASSERT_EQ(usched_write(sv[0], big, sizeof big, 0), -EAGAIN);
    ASSERT_EQ(usched_write(sv[0], big, sizeof big, 10 * ms), -ETIMEDOUT);
    /* Data present: 0 returns it. */
    ASSERT_EQ(usched_write(sv[1], "x", 1, 0), 1);
    ASSERT_EQ(usched_read(sv[1], b, 1, 0), 1);
    ASSERT_OK(usched_close(sv[0]));
    ASSERT_OK(usched_close(sv[1]));
    /* accept times out on a listener nobody dials */
    struct sockaddr_in a;
    int l = io_listener(&a, 4);
    t0 = test_now();
    ASSERT_EQ(usched_accept(l, NULL, NULL, 20 * ms), -ETIMEDOUT);
    ASSERT(test_now() - t0 >= 0.020);
    ASSERT_OK(usched_close(l));
    /* connect times out on a UNIX listener whose backlog is full (no
     * readiness event ever says when it has room) */
    struct sockaddr_un u = {.sun_family = AF_UNIX};
    snprintf(u.sun_path, sizeof u.sun_path, "/tmp/usched-io-timeout-%d-%s", (int)getpid(),
             who[0] == 'f' ? "f" : "t");
    unlink(u.sun_path);
    l = usched_socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_OK(l);
    ASSERT_OK(bind(l, (struct sockaddr *)&u, sizeof u));
    ASSERT_OK(listen(l, 0));
    int c[4], timedout = 0;
    for (int i = 0; i < 4; i++) {
        c[i] = usched_socket(AF_UNIX, SOCK_STREAM, 0);
        ASSERT_OK(c[i]);
        int rc = usched_connect(c[i], (struct sockaddr *)&u, sizeof u, 20 * ms);
        ASSERT(rc == 0 || rc == -ETIMEDOUT);
        timedout += rc == -ETIMEDOUT;
    }
    ASSERT_GT(timedout, 0);
    for (int i = 0; i < 4; i++) ASSERT_OK(usched_close(c[i]));
    ASSERT_OK(usched_close(l));
    unlink(u.sun_path);
}

static void fiber_fires(void *arg)
{
    check_fires((const char *)arg);
}

/* The race: a writer sends one byte at about the reader's timeout; every
 * 7th byte only once the reader's wait for it has timed out, so that a
 * byte arriving just after a timeout, while the reader waits again, is sure
 * to happen (RACE_EVERY of them at least). */
#define RACE_EVERY 7
struct race {
    int sv[2];
    long n;
    _Atomic long got, timeouts, timed_out_on; /* the byte whose wait last timed out */
};

static void race_writer(void *arg)
{
    struct race *r = arg;
    for (long i = 0; i < r->n; i++) {
        if (i % RACE_EVERY == RACE_EVERY - 1) {
            while (atomic_load(&r->timed_out_on) != i) usched_sleep_ns(50000);
        } else {
            usched_sleep_ns(200000 + (uint64_t)(i % RACE_EVERY) * 50000); /* 0.2 .. 0.5 ms */
        }
        char c = (char)i;
        ASSERT_EQ(usched_write(r->sv[1], &c, 1, USCHED_FOREVER), 1);
    }
}

static void race_reader(void *arg)
{
    struct race *r = arg;
    for (long i = 0; i < r->n;) {
        char c;
        ssize_t k = usched_read(r->sv[0], &c, 1, 300000); /* 0.3 ms */
        if (k == -ETIMEDOUT) {
            atomic_fetch_add(&r->timeouts, 1);
            atomic_store(&r->timed_out_on, i);
            continue;
        }
        ASSERT_EQ(k, 1);
        ASSERT_EQ(c, (char)i); /* nothing lost, nothing out of order */
        i++;
        atomic_fetch_add(&r->got, 1);
    }
}

/* ---- far deadlines ---- */

struct far {
    int a[2], b[2], d[2], e[2];
    _Atomic int a_waiting, d_waiting;
};

static void far_a(void *arg)
{
    struct far *f = arg;
    char c;
    atomic_store(&f->a_waiting, 1);
    double t0 = test_now();
    ssize_t k = usched_read(f->a[0], &c, 1, 20000000000ull);
    printf("earlier: A read %zd after %.3f s (20 s asked; B's byte expected)\n", k, test_now() - t0);
    ASSERT_EQ(k, 1);
    ASSERT_EQ(usched_self_cpu(), 0);
}

static void far_b(void *arg)
{
    struct far *f = arg;
    read_times_out("earlier: B", f->b[0], 100);
    ASSERT_EQ(usched_write(f->a[1], "b", 1, USCHED_FOREVER), 1);
}

static void far_d(void *arg)
{
    struct far *f = arg;
    char c;
    atomic_store(&f->d_waiting, 1);
    ASSERT_EQ(usched_read(f->d[0], &c, 1, 500000000), 1); /* the test writes after 20 ms */
}

static void far_e(void *arg)
{
    struct far *f = arg;
    read_times_out("later: E", f->e[0], 800);
}

static void check_far(void)
{
    struct far f = {0};
    ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, f.a));
    ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, f.b));
    ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, f.d));
    ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, f.e));
    uint64_t far0 = io_stat(s, "io_timer_far"), sets0 = io_stat(s, "io_timer_sets");
    usched_task_t *a, *b, *d, *e;
    ASSERT_OK(usched_spawn_on(s, &a, 0, far_a, &f));
    while (!atomic_load(&f.a_waiting)) usleep(1000);
    usleep(20000); /* A in its read, CPU 0 parked with A's deadline (or about to) */
    /* A's descriptor is homed on CPU 0, unless CPU 0 was packed onto
     * another (a contended CPU, K5: the live machine busy beside the test) */
    int home = atomic_load(&usched__pd_get(f.a[0])->home);
    ASSERT_OK(usched_spawn_on(s, &b, 0, far_b, &f));
    ASSERT_OK(usched_join(b));
    ASSERT_OK(usched_join(a));

    ASSERT_OK(usched_spawn_on(s, &d, 0, far_d, &f));
    ASSERT_OK(usched_spawn_on(s, &e, 0, far_e, &f));
    while (!atomic_load(&f.d_waiting)) usleep(1000);
    usleep(20000);
    ASSERT_EQ(write(f.d[1], "d", 1), 1);
    ASSERT_OK(usched_join(d));
    ASSERT_OK(usched_join(e));
    uint64_t far = io_stat(s, "io_timer_far") - far0, sets = io_stat(s, "io_timer_sets") - sets0;
    printf("far: io_timer_far +%llu, io_timer_sets +%llu\n", (unsigned long long)far, (unsigned long long)sets);
    printf("far: A's descriptor homed on CPU %d\n", home);
    if (io_percpu(s) && home == 0) {
        ASSERT_GE(far, 1);
        ASSERT_GE(sets, 1);
    }
    ASSERT_LE(sets, far);
    int *fds[] = {f.a, f.b, f.d, f.e};
    for (int i = 0; i < 4; i++) {
        ASSERT_OK(usched_close(fds[i][0]));
        ASSERT_OK(usched_close(fds[i][1]));
    }
}

static void *thread_fires(void *arg)
{
    check_fires((const char *)arg);
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_start(s));
    usched_task_t *t;
    ASSERT_OK(usched_spawn(s, &t, fiber_fires, "fiber"));
    ASSERT_OK(usched_join(t));
    pthread_t th;
    pthread_create(&th, NULL, thread_fires, "outside thread");
    pthread_join(th, NULL);
    check_far();

    struct race r = {.n = test_scale(2000), .timed_out_on = -1};
    ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, r.sv));
    usched_task_t *a, *b;
    ASSERT_OK(usched_spawn_on(s, &a, 0, race_reader, &r));
    ASSERT_OK(usched_spawn_on(s, &b, usched_ncpus(s) - 1, race_writer, &r));
    ASSERT_OK(usched_join(a));
    ASSERT_OK(usched_join(b));
    printf("race: %ld bytes, all received in order; %ld timeouts raced with them\n", atomic_load(&r.got),
           atomic_load(&r.timeouts));
    ASSERT_EQ(atomic_load(&r.got), r.n);
    /* the race happened: each RACE_EVERY-th byte came after its wait timed out */
    ASSERT_GE(atomic_load(&r.timeouts), r.n / RACE_EVERY);
    char c;
    ASSERT_EQ(usched_read(r.sv[0], &c, 1, 0), -EAGAIN); /* and nothing extra */
    ASSERT_OK(usched_close(r.sv[0]));
    ASSERT_OK(usched_close(r.sv[1]));
    ASSERT_OK(usched_destroy(s));
    printf("ok\n");
    return 0;
}
