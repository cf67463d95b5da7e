/*
 * The I/O hint a policy gets about a descriptor's home (USCHED_SEL_IO_HOME,
 * io_poller=percpu; docs/io.md). A test policy places every fiber on CPU 1
 * and keeps it there, and records the I/O wake-ups it is asked about. A
 * fiber on CPU 1 reads a socketpair byte by byte while the main thread
 * writes: the descriptor's home is CPU 1 (the CPU its fiber waits on), so
 *   - percpu: every I/O wake-up decided on CPU 1 carries USCHED_SEL_IO_HOME,
 *     and none decided elsewhere does; one decided elsewhere can only come
 *     from an idle CPU taking readiness from CPU 1's set (io_poll_stolen);
 *     at least one wake-up carries the hint;
 *   - shared: no wake-up carries it.
 * The policy's own home (its io_home op): a second test policy answers CPU 0
 * for the descriptor; it is asked once with USCHED_HOME_NEW (the fd, the
 * fiber's CPU 1, no home yet) and then at every wait (a socketpair is not
 * TCP) with home 0, and every hinted wake-up is decided on CPU 0. A third
 * answers a CPU out of range: the core's rule (the fiber's CPU, 1) holds.
 * Under percpu with the home on CPU 1, the reader is CPU 1's only work, so
 * its wake-ups wake no other CPU (io_wake_owner; few futex or eventfd
 * kicks in all).
 * The default policy's step 2h (policy/usched.c): a reader whose home is
 * the CPU it first ran on, and a bound fiber there that yields for ever, so
 * that CPU finds the bytes by its own polls while busy, and the other CPU
 * idles. Every such wake-up, polled from the home set while the home runs
 * one fiber and queues none, is placed at home; before, the policy sent it
 * to the idle CPU.
 * Counts, not times: which CPU polls first is up to the machine.
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "io_test.h"
#include "usched/policy.h"

#define HOME 1
#define BYTES 200

static _Atomic unsigned io_wakes, io_home, home_elsewhere, home_cpu_wrong, got;
static int expect_home = HOME; /* the CPU whose set the descriptor should be in */
static int home_answer;        /* what the io_home op answers */
static int reader_fd;
static _Atomic unsigned asked_new, asked_again, asked_wrong;

static void home_select(usched_pol_ctx_t *ctx, const struct usched_select_args *a, struct usched_select_result *out)
{
    (void)ctx;
    if (a->flags & USCHED_SEL_IO) {
        atomic_fetch_add(&io_wakes, 1);
        if (a->flags & USCHED_SEL_IO_HOME) {
            atomic_fetch_add(&io_home, 1);
            if (a->waker_cpu != expect_home) atomic_fetch_add(&home_cpu_wrong, 1);
        } else if (a->waker_cpu != expect_home) {
            atomic_fetch_add(&home_elsewhere, 1);
        }
    }
    out->cpu = HOME;
    out->reason = USCHED_REASON_PREV;
}

static const struct usched_ops home_ops = {
    .name = "iohome",
    .brief = "test: every fiber on CPU 1, I/O wake-ups recorded",
    .flags = USCHED_OPS_NO_STEAL, /* the reader stays on CPU 1, and so does its home */
    .select_cpu = home_select,
};

static int home_op(usched_pol_ctx_t *ctx, const struct usched_home_args *a)
{
    (void)ctx;
    bool ok = a->size == sizeof *a && a->fd == reader_fd && a->fiber_cpu == HOME && a->packet_cpu == -1 &&
              !(a->flags & USCHED_HOME_TCP);
    if (a->flags & USCHED_HOME_NEW) {
        atomic_fetch_add(&asked_new, 1);
        ok &= a->home == -1;
    } else {
        atomic_fetch_add(&asked_again, 1);
        ok &= a->home == expect_home;
    }
    if (!ok) atomic_fetch_add(&asked_wrong, 1);
    return home_answer;
}

static const struct usched_ops home_op_ops = {
    .name = "iohome_op",
    .brief = "test: every fiber on CPU 1, its descriptor's home where the test says",
    .flags = USCHED_OPS_NO_STEAL,
    .select_cpu = home_select,
    .io_home = home_op,
};

/* The reader's side: BYTES bytes, in order, one read each (on_home: each
 * read returns on CPU HOME); `got` counts them. */
static void read_bytes(int fd, bool on_home)
{
    for (int i = 0; i < BYTES; i++) {
        char b;
        ASSERT_EQ(usched_read(fd, &b, 1, USCHED_FOREVER), 1);
        ASSERT_EQ(b, (char)i);
        if (on_home) ASSERT_EQ(usched_self_cpu(), HOME);
        atomic_store(&got, (unsigned)i + 1);
    }
}

/* The writer's side: each byte once the reader took the one before, so that
 * the reader waits again (a wake-up per byte). */
static void write_bytes(int fd)
{
    for (int i = 0; i < BYTES; i++) {
        char b = (char)i;
        ASSERT_EQ(write(fd, &b, 1), 1);
        while (atomic_load(&got) < (unsigned)i + 1) usleep(50);
    }
}

static void reader(void *arg)
{
    read_bytes((int)(long)arg, true);
}

static void run(const char *poller, const char *policy)
{
    atomic_store(&asked_new, 0);
    atomic_store(&asked_again, 0);
    atomic_store(&asked_wrong, 0);
    atomic_store(&io_wakes, 0);
    atomic_store(&io_home, 0);
    atomic_store(&home_elsewhere, 0);
    atomic_store(&home_cpu_wrong, 0);
    atomic_store(&got, 0);
    char knobs[64];
    snprintf(knobs, sizeof knobs, "io_poller=%s", poller);
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "topology", "pack:1 l3:1 l2:1 core:2 pu:1"));
    ASSERT_OK(usched_set(s, "policy", policy));
    ASSERT_OK(usched_set(s, "knobs", knobs));
    ASSERT_OK(usched_start(s));
    int sv[2];
    ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv));
    reader_fd = sv[0];
    ASSERT_OK(usched_spawn(s, NULL, reader, (void *)(long)sv[0]));
    write_bytes(sv[1]);
    ASSERT_OK(usched_wait(s));
    uint64_t stolen = io_stat(s, "io_poll_stolen");
    uint64_t owner = io_stat(s, "io_wake_owner");
    uint64_t kicks = io_stat(s, "futex_wakes") + io_stat(s, "io_breaks");
    printf("%s, %s (home %d): %u I/O wake-ups, %u with the home hint, %u decided off the home without it, "
           "io_poll_stolen %llu; io_home asked %u new, %u again, %u wrong\n", poller, policy, expect_home,
           atomic_load(&io_wakes), atomic_load(&io_home), atomic_load(&home_elsewhere),
           (unsigned long long)stolen, atomic_load(&asked_new), atomic_load(&asked_again),
           atomic_load(&asked_wrong));
    ASSERT_GE(atomic_load(&io_wakes), 1);
    ASSERT_EQ(atomic_load(&home_cpu_wrong), 0);
    printf("  io_wake_owner %llu, other CPUs woken %llu times\n", (unsigned long long)owner,
           (unsigned long long)kicks);
    if (!strcmp(poller, "percpu")) {
        ASSERT_GE(atomic_load(&io_home), 1);
        if (atomic_load(&home_elsewhere)) ASSERT_GE(stolen, 1);
        /* The reader is CPU 1's only work, readied by CPU 1 while it runs
         * no fiber: CPU 1 runs it and wakes no other CPU for it (IOW,
         * place.c). Before, each byte woke CPU 0, which found nothing to
         * steal (a NO_STEAL policy) and parked again. */
        if (expect_home == HOME) {
            ASSERT_GE(owner, 1);
            ASSERT_LT(kicks, BYTES / 4);
        }
    } else {
        ASSERT_EQ(atomic_load(&io_home), 0);
    }
    if (!strcmp(poller, "percpu") && !strcmp(policy, "iohome_op")) {
        ASSERT_EQ(atomic_load(&asked_new), 1);
        ASSERT_GE(atomic_load(&asked_again), 1);
        ASSERT_EQ(atomic_load(&asked_wrong), 0);
    } else {
        ASSERT_EQ(atomic_load(&asked_new) + atomic_load(&asked_again), 0); /* shared: no homes */
    }
    close(sv[0]);
    close(sv[1]);
    ASSERT_OK(usched_destroy(s));
}

/* ---- the default policy with a busy home (step 2h) ------------------------- */

extern const struct usched_ops usched__policy_usched;
static struct usched_ops usched_rec;
static _Atomic unsigned busy_home, busy_home_away;
static _Atomic int reader_cpu = -1, yield_stop;

/* The default policy's decisions, recorded: I/O wake-ups polled from the
 * home set while the home runs one fiber and queues nothing. */
static void usched_rec_select(usched_pol_ctx_t *ctx, const struct usched_select_args *a,
                              struct usched_select_result *out)
{
    bool busy = (a->flags & USCHED_SEL_IO_HOME) && a->waker_cpu >= 0 && usched_pol_cpu_load(ctx, a->waker_cpu) == 1;
    usched__policy_usched.select_cpu(ctx, a, out);
    if (!busy) return;
    atomic_fetch_add(&busy_home, 1);
    if (out->cpu != a->waker_cpu) atomic_fetch_add(&busy_home_away, 1);
}

static void busy_reader(void *arg)
{
    /* No scheduling point before the first read registers the descriptor:
     * its home is this CPU. */
    atomic_store(&reader_cpu, usched_self_cpu());
    read_bytes((int)(long)arg, false);
}

static void yielder(void *arg)
{
    (void)arg;
    while (!atomic_load(&yield_stop)) usched_yield();
}

static void run_busy_home(void)
{
    usched_rec = usched__policy_usched;
    usched_rec.name = "usched_rec";
    usched_rec.select_cpu = usched_rec_select;
    ASSERT_OK(usched_policy_register(&usched_rec));
    atomic_store(&got, 0);
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "topology", "pack:1 l3:1 l2:1 core:2 pu:1"));
    ASSERT_OK(usched_set(s, "policy", "usched_rec"));
    ASSERT_OK(usched_set(s, "knobs", "io_poller=percpu"));
    ASSERT_OK(usched_start(s));
    int sv[2];
    ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv));
    ASSERT_OK(usched_spawn(s, NULL, busy_reader, (void *)(long)sv[0]));
    while (atomic_load(&reader_cpu) < 0) usleep(100);
    usched_task_t *y;
    ASSERT_OK(usched_spawn_on(s, &y, atomic_load(&reader_cpu), yielder, NULL));
    write_bytes(sv[1]);
    atomic_store(&yield_stop, 1);
    ASSERT_OK(usched_join(y));
    ASSERT_OK(usched_wait(s));
    printf("percpu, usched, home CPU %d busy: %u wake-ups polled at the busy home, %u placed elsewhere; "
           "io_rehomes %llu\n", atomic_load(&reader_cpu), atomic_load(&busy_home), atomic_load(&busy_home_away),
           (unsigned long long)io_stat(s, "io_rehomes"));
    ASSERT_GE(atomic_load(&busy_home), 1);
    ASSERT_EQ(atomic_load(&busy_home_away), 0);
    close(sv[0]);
    close(sv[1]);
    ASSERT_OK(usched_destroy(s));
}

int main(void)
{
    run_busy_home();
    ASSERT_OK(usched_policy_register(&home_ops));
    ASSERT_OK(usched_policy_register(&home_op_ops));
    run("percpu", "iohome");
    run("shared", "iohome");
    expect_home = 0;
    home_answer = 0;
    run("percpu", "iohome_op");
    run("shared", "iohome_op");
    expect_home = HOME; /* an answer out of range: the core's rule */
    home_answer = 99;
    run("percpu", "iohome_op");
    printf("io_home: ok\n");
    return 0;
}
