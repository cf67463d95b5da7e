/*
 * A fiber that yields in a loop while nothing else is queued on its CPU
 * still lets timers fire and I/O readiness be seen: fiber A yields until
 * fiber B, on the same CPU, has read from a socketpair the bytes A wrote
 * (or until B's usched_sleep_ns returns). On a one-worker scheduler, and on
 * two workers with both fibers bound to CPU 0 and the stall monitor off
 * (stall_us=0), nothing else would ever poll for them. A watchdog turns a
 * lost wake-up into a failure instead of a hang.
 */
#include <string.h>

#include "io_test.h"

static int sv[2];
static _Atomic int b_waiting, b_done;
static _Atomic long progress;

static void reader(void *arg)
{
    (void)arg;
    char buf[16] = {0};
    atomic_store(&b_waiting, 1);
    ssize_t n = usched_read(sv[0], buf, sizeof buf, USCHED_FOREVER);
    ASSERT_EQ(n, 5);
    ASSERT_STR_EQ(buf, "hello");
    atomic_store(&b_done, 1);
}

static void sleeper(void *arg)
{
    (void)arg;
    atomic_store(&b_waiting, 1);
    ASSERT_OK(usched_sleep_ns(1000 * 1000));
    atomic_store(&b_done, 1);
}

/* A: starts B on its own CPU, yields until B waits (B runs on A's first
 * yield and blocks), writes for a reader, then yields until B is done. */
static void yielder(void *arg)
{
    void (*b_fn)(void *) = (void (*)(void *))arg;
    usched_task_t *b;
    ASSERT_OK(usched_spawn_on(usched_self(), &b, usched_self_cpu(), b_fn, NULL));
    while (!atomic_load(&b_waiting)) usched_yield();
    if (b_fn == reader) ASSERT_EQ(write(sv[1], "hello", 5), 5);
    while (!atomic_load(&b_done)) usched_yield();
    atomic_fetch_add(&progress, 1);
    ASSERT_OK(usched_join(b));
}

static void run(const char *topology, const char *knobs, void (*b_fn)(void *), const char *what)
{
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "topology", topology));
    if (knobs) ASSERT_OK(usched_set(s, "knobs", knobs));
    ASSERT_OK(usched_start(s));
    ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    atomic_store(&b_waiting, 0);
    atomic_store(&b_done, 0);
    struct io_watchdog wd;
    io_watchdog_start(&wd, &progress, 30, what, s);
    usched_task_t *a;
    ASSERT_OK(usched_spawn_on(s, &a, 0, yielder, (void *)b_fn));
    ASSERT_OK(usched_join(a));
    io_watchdog_stop(&wd);
    int done = atomic_load(&b_done);
    ASSERT_EQ(done, 1);
    ASSERT_OK(usched_close(sv[0]));
    ASSERT_OK(close(sv[1]));
    ASSERT_OK(usched_destroy(s));
    printf("%s: ok\n", what);
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    const char *one = "pack:1 core:1 pu:1", *two = "pack:1 core:2 pu:1";
    run(one, NULL, reader, "one worker, yield until a read returns");
    run(one, NULL, sleeper, "one worker, yield until a sleep ends");
    run(one, "stall_us=0", reader, "one worker, stall_us=0, read");
    run(two, "stall_us=0", reader, "two workers, stall_us=0, read");
    run(two, "stall_us=0", sleeper, "two workers, stall_us=0, sleep");
    printf("ok\n");
    return 0;
}
