/*
 * A scheduler holding 10,000 idle connections (fewer at a lower stress
 * scale or fd limit) with no timers uses no CPU while idle: once every
 * reader waits and every CPU has parked for good (one in the I/O poller,
 * the others on their futex, each thread blocked in the kernel with no
 * deadline, so no poller deferral is still running out), no worker wakes,
 * switches or polls for a second (the counters do not move, every CPU is
 * still parked), and the process's CPU time is printed.
 */
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>

#include "io/io_impl.h"
#include "io_test.h"

static usched_t *s;
static _Atomic long done;

static void reader(void *arg)
{
    int fd = (int)(long)arg;
    char b;
    ASSERT_EQ(usched_read(fd, &b, 1, USCHED_FOREVER), 1);
    ASSERT_EQ(b, 'x');
    atomic_fetch_add(&done, 1);
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Whether the thread tid is blocked in a call with no deadline: futex or
 * epoll_pwait2 with a NULL timeout, epoll_wait or epoll_pwait with -1 (the
 * fourth argument of each), as /proc/self/task/TID/syscall shows it: the
 * call's number and arguments, or "running". Under qemu-user (a cross
 * build's USCHED_TEST_EMULATOR) the thread makes the host's calls, so the
 * numbers of x86-64, the host CI uses, are known too. */
static bool blocked_for_good(int tid)
{
    enum { NULLPTR, MINUS1 };
    static const struct {
        long nr;
        int timeout;
    } calls[] = {
        {SYS_futex, NULLPTR},
#ifdef SYS_epoll_pwait2
        {SYS_epoll_pwait2, NULLPTR},
#endif
#ifdef SYS_epoll_wait
        {SYS_epoll_wait, MINUS1},
#endif
        {SYS_epoll_pwait, MINUS1},
        /* x86-64's futex, epoll_pwait2, epoll_wait, epoll_pwait */
        {202, NULLPTR}, {441, NULLPTR}, {232, MINUS1}, {281, MINUS1},
    };
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
    FILE *f = fopen(path, "r");
    ASSERT(f);
    bool ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    long nr;
    unsigned long long a[6];
    if (!ok || sscanf(line, "%ld %llx %llx %llx %llx", &nr, &a[0], &a[1], &a[2], &a[3]) != 5) return false;
    bool emulated = getenv("USCHED_TEST_EMULATOR") != NULL;
    for (size_t i = 0; i < sizeof calls / sizeof *calls; i++) {
        if (calls[i].nr != nr || (i >= sizeof calls / sizeof *calls - 4 && !emulated)) continue;
        return calls[i].timeout == NULLPTR ? a[3] == 0 : (uint32_t)a[3] == UINT32_MAX;
    }
    return false;
}

/* Counts the CPUs parked (in *polling, those parked in the poller) and
 * whether each worker thread is blocked for good. */
static int parked_cpus(int *polling, bool *all_blocked)
{
    int parked = 0;
    *polling = 0;
    *all_blocked = true;
    for (int c = 0; c < s->ncpus; c++) {
        uint32_t st = atomic_load(&s->wk[c]->state);
        parked += st == WK_PARKED || st == WK_PARKED_POLL;
        *polling += st == WK_PARKED_POLL;
        int tid = atomic_load(&s->wk[c]->tid);
        if (!tid || !blocked_for_good(tid)) *all_blocked = false;
    }
    return parked;
}

/* CPUs that block in an epoll set once all are parked: the one holding the
 * shared set's role, or under io_poller=percpu each CPU with waiters in its
 * own set. */
static int want_polling(void)
{
    struct usched__io *io = atomic_load(&s->io);
    if (!io->percpu) return 1;
    int n = 0;
    for (int c = 0; c < s->ncpus; c++) n += atomic_load(&io->set[c].nwaiters) > 0;
    return n;
}

static const char *watched[] = {"switches", "parks", "io_polls", "io_poll_blocks", "io_events",
                                "spins", "futex_wakes"};
#define NW (int)(sizeof watched / sizeof *watched)

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    long n = test_cap_alive(test_scale(10000));
    long lim = io_raise_nofile(2 * n + 256);
    if (2 * n + 256 > lim) n = (lim - 256) / 2;
    int *fds = calloc((size_t)(2 * n), sizeof *fds);
    ASSERT(fds);
    for (long i = 0; i < n; i++) ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds + 2 * i));
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_start(s));
    for (long i = 0; i < n; i++) ASSERT_OK(usched_spawn(s, NULL, reader, (void *)(long)fds[2 * i]));
    /* Until every reader waits on its fd. */
    for (int k = 0; k < 3000; k++) {
        struct usched__io *io = atomic_load(&s->io);
        if (io && usched__io_nwaiters(io) == (uint32_t)n) break;
        usleep(10000);
    }
    ASSERT_EQ(usched__io_nwaiters(atomic_load(&s->io)), n);
    /* Until every CPU has parked for good, one of them in the poller. */
    int parked = 0, polling = 0;
    bool blocked = false;
    for (double end = test_now() + 30; test_now() < end; usleep(10000)) {
        parked = parked_cpus(&polling, &blocked);
        if (parked == s->ncpus && polling == want_polling() && blocked) break;
    }
    printf("%d of %d CPUs parked, %d in the poller, every thread blocked with no deadline: %s\n", parked, s->ncpus,
           polling, blocked ? "yes" : "no");
    ASSERT_EQ(parked, s->ncpus);
    ASSERT_GE(polling, 1);
    ASSERT_EQ(polling, want_polling());
    ASSERT(blocked);
    uint64_t before[NW];
    for (int i = 0; i < NW; i++) before[i] = io_stat(s, watched[i]);
    double c0 = cpu_s(), t0 = test_now();
    sleep(1);
    double c1 = cpu_s(), t1 = test_now();
    printf("%ld idle connections: %.3f ms of CPU in %.2f s\n", n, (c1 - c0) * 1e3, t1 - t0);
    for (int i = 0; i < NW; i++) {
        uint64_t d = io_stat(s, watched[i]) - before[i];
        printf("  %s +%llu\n", watched[i], (unsigned long long)d);
        ASSERT_EQ_U(d, 0);
    }
    ASSERT_EQ(parked_cpus(&polling, &blocked), s->ncpus);
    ASSERT_EQ(polling, want_polling());
    for (long i = 0; i < n; i++) ASSERT_EQ(usched_write(fds[2 * i + 1], "x", 1, USCHED_FOREVER), 1);
    ASSERT_OK(usched_wait(s));
    ASSERT_EQ(atomic_load(&done), n);
    for (long i = 0; i < 2 * n; i++) ASSERT_OK(usched_close(fds[i]));
    free(fds);
    ASSERT_OK(usched_destroy(s));
    printf("ok\n");
    return 0;
}
