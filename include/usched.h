/*
 * usched - a topology-aware user-space scheduler.
 *
 * Fibers (user-level threads with their own stacks) run on one worker thread
 * per CPU. Each CPU has its own run queue and a lock-free inbox; placement on
 * spawn and wake-up, and stealing when idle, follow the machine's topology
 * (SMT siblings, L2, LLC, package, NUMA node) as read by hwloc. The placement
 * algorithm is a selectable policy with runtime knobs.
 *
 * Conventions:
 *  - Every function returns 0 (or a count) on success and a negative errno on
 *    failure. No function sets errno: a fiber may resume on another worker
 *    thread, and errno belongs to a thread.
 *  - usched_strerror() turns a code into text; usched_last_error() gives the
 *    detail (naming the bad input) of the calling thread's last failure.
 *  - Lifecycle: usched_create -> usched_set (configure) -> usched_start ->
 *    spawn/join/wait -> usched_destroy. Configuring a started scheduler
 *    returns -EBUSY.
 */
#ifndef USCHED_H
#define USCHED_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define USCHED_VERSION_MAJOR 0
#define USCHED_VERSION_MINOR 2
#define USCHED_VERSION_PATCH 0
#define USCHED_VERSION_STRING "0.2.0"

typedef struct usched usched_t;           /* one scheduler instance; several may coexist */
typedef struct usched_task usched_task_t; /* a fiber */

/* Version of the library actually loaded ("0.2.0"; USCHED_VERSION_STRING is
 * the header's), and of the hwloc it was built with ("2.9.0", followed by
 * " (run-time API 0x...)" when the hwloc loaded has another API version). */
const char *usched_version(void);
const char *usched_hwloc_version(void);

/* ---- lifecycle ---------------------------------------------------------- */

/* Allocates a scheduler with defaults taken from the environment
 * (USCHED_POLICY, USCHED_KNOBS, USCHED_TOPOLOGY, USCHED_CPUS, USCHED_EMULATE,
 * USCHED_PIN, USCHED_TRACE, USCHED_SCHEDTRACE). A bad
 * environment value makes usched_create fail with -EINVAL, the detail
 * naming the variable; a USCHED_TOPOLOGY that cannot be loaded, or
 * USCHED_CPUS naming CPUs the topology lacks, makes usched_start fail, as
 * the same usched_set values do (the topology is loaded at start). */
int usched_create(usched_t **out);

/* Configures one setting before usched_start. Keys:
 *   "policy"     policy name (see `usched policies`)
 *   "topology"   "" or NULL for this machine, an hwloc synthetic string, an
 *                hwloc XML file or a directory holding a captured Linux root
 *   "cpus"       CPU list restricting the topology, e.g. "0-7,16" (dense
 *                usched CPU numbers of the loaded topology)
 *   "knobs"      "name=value,name=value" (see `usched knobs`)
 *   "stack_size" bytes per fiber stack, suffix k or m allowed
 *   "pin"        1 to pin workers to their CPUs (default on the live machine),
 *                0 not to
 *   "trace"      a file to write a trace to (Perfetto protobuf, docs/trace.md)
 *                when the scheduler is destroyed; "" or NULL: no trace. A
 *                file that cannot be created fails usched_start.
 *   "trace_mb"   MiB the trace may keep in memory, all CPUs together
 *                (default 128); past it a file trace drops events
 *   "trace_mode" "file" (default: everything up to trace_mb) or "ring" (a
 *                flight recorder: the last trace_mb MiB, older events dropped)
 *   "trace_signal" 1: SIGUSR2 writes the trace so far to FILE.N (the
 *                library installs its handler; a program asks for it)
 *   "trace_stall_dump" 1: when the stall monitor sees a stall, the trace so
 *                far is written to FILE.N
 *   "trace_clock" "auto" (default: the TSC where it ticks at a constant rate,
 *                converted to CLOCK_MONOTONIC when written) or "monotonic"
 *   "schedtrace" milliseconds between one-line summaries on stderr (per CPU:
 *                queue length, state, switches); "0": none
 * Returns -EINVAL for a bad value (detail in usched_last_error()), -EBUSY after
 * usched_start, -ENOENT for an unknown key. Knobs that may change while running
 * (see `usched knobs`) are accepted after start. */
int usched_set(usched_t *s, const char *key, const char *value);

/* Loads the topology and starts one worker per CPU. */
int usched_start(usched_t *s);

/* Number of CPUs (workers) of a started scheduler. */
int usched_ncpus(usched_t *s);

/* Spawns a fiber running fn(arg). From a fiber or from any outside thread.
 * out == NULL makes the fiber detached; otherwise it must be joined exactly
 * once with usched_join. The fiber starts with the FP rounding mode and
 * exception masks of the thread that called usched_start; each fiber keeps
 * its own across switches. */
int usched_spawn(usched_t *s, usched_task_t **out, void (*fn)(void *), void *arg);

/* As usched_spawn, but the fiber is bound: it runs only on `cpu` and is never
 * stolen. -EINVAL if cpu is out of range. */
int usched_spawn_on(usched_t *s, usched_task_t **out, int cpu, void (*fn)(void *), void *arg);

/* As usched_spawn, for a child that may run at once as a plain call: when
 * the caller is a fiber of s and at least 64 fibers already wait on its CPU
 * (queued, not started), and half of its stack is free, fn(arg) runs
 * right here on the caller's stack before the call returns - as OpenMP runs a task undeferred once its queue
 * is that long - and *out (if not NULL) receives a handle of a finished
 * child, whose joins return 0 at once. Otherwise it is usched_spawn. The
 * child must therefore not wait for anything the caller does after the
 * spawn (it would wait forever); inside it, usched_self_id() reports the
 * caller. Counted as spawns_called. */
int usched_spawn_call(usched_t *s, usched_task_t **out, void (*fn)(void *), void *arg);

/* Waits for the fiber to finish and releases it. In a fiber it parks the
 * fiber; outside it blocks the thread. A fiber joining the fiber it spawned
 * last, before that one started, runs it inline on its own stack (no switch,
 * as TBB's wait does); inside it, usched_self_id() reports the joiner. -EINVAL for a task joined already,
 * -EDEADLK for a fiber joining itself, -ECANCELED if the scheduler was
 * destroyed before the fiber ran to completion. Two joins of one fiber at
 * the same moment are undefined, as for pthread_join. */
int usched_join(usched_task_t *t);

/* Lets other runnable fibers of this CPU run. With none queued the fiber
 * runs on at once, and now and then (every 8th to 1024th such yield) such a
 * yield first fires due timers and polls I/O without blocking, so that a
 * fiber yielding in a loop while it waits for another fiber's sleep or read
 * lets that one wake and run. Outside a fiber it calls sched_yield(). */
void usched_yield(void);

/* Preemption (docs/preempt.md): while the calling fiber's count is above 0
 * the monitor's signal does not preempt it (for code that holds a
 * pthread_mutex_t or calls a library that is not safe to interrupt). Calls
 * nest; usched_preempt_off returns the new depth, usched_preempt_on the
 * depth left and, back at 0, takes a preemption refused meanwhile (a
 * yield). -EPERM outside a fiber; usched_preempt_on: -EINVAL when the count
 * is 0 already. */
int usched_preempt_off(void);
int usched_preempt_on(void);

/* CPU of the calling fiber (dense usched number), -1 outside a fiber. */
int usched_self_cpu(void);

/* The calling fiber's scheduler, NULL outside a fiber. */
usched_t *usched_self(void);

/* Numeric id of the calling fiber (unique within its scheduler), 0 outside. */
uint64_t usched_self_id(void);

/* Outside thread: blocks until every fiber spawned so far has finished.
 * -EDEADLK when called from a fiber of the same scheduler. */
int usched_wait(usched_t *s);

/* Waits for every fiber to finish, stops the workers and frees everything.
 * It waits as long as a fiber may still be woken: one that runs, is queued,
 * sleeps (a timer is armed), waits for a descriptor (usched_read and the
 * other I/O calls: close the descriptor with usched_close, or have the peer
 * write or shut down, to end that wait) or for an offloaded call (until the
 * call returns). When every fiber left is blocked with none of these to
 * wake it (a channel, mutex or join that nothing inside the scheduler will
 * complete) it returns -EDEADLK after about 150 ms of quiet: outside joiners
 * of those fibers get -ECANCELED, the workers stop, and the scheduler's
 * memory and the fibers' stacks are kept for the life of the process, so
 * that a wake-up sent later by another thread (a channel send) reads valid
 * memory; that fiber never runs. Destroy cannot see such a thread: finish
 * what outside threads will do for fibers before calling it. -EDEADLK also
 * when called from a fiber of the same scheduler (nothing done then). */
int usched_destroy(usched_t *s);

/* ---- errors and statistics ---------------------------------------------- */

/* Text for a (negative or positive) errno value; never NULL. */
const char *usched_strerror(int err);

/* Detail of the calling thread's last failed usched call ("knobs: unknown
 * knob 'foo'"), or "" if none. Valid until the next failing call. */
const char *usched_last_error(void);

/* Reads one counter by name, summed over CPUs (see usched_stats_print for the
 * names). -ENOENT for an unknown name. */
int usched_stat(usched_t *s, const char *name, uint64_t *value);

/* Number of counters, and name/description of the i-th, for iteration. */
int usched_stat_count(void);
const char *usched_stat_name(int i);
const char *usched_stat_desc(int i);

/* Prints every counter as "name value" lines, then the wake-up latency
 * (all CPUs, then each CPU) as "wake_latency n=N p50=..ns p90=..ns p99=..ns
 * max=..ns" lines. */
int usched_stats_print(usched_t *s, FILE *f);

/* Resets every counter and the wake-up latency histograms to zero (running
 * or not). */
int usched_stats_reset(usched_t *s);

/* Wake-up latency: the time from a wake-up decision to the woken fiber
 * running, kept per CPU (the CPU that ran it) in a log-scale histogram at
 * all times, for one wake-up in 16 chosen at random (every wake-up from an
 * outside thread). Quantiles are the upper end of their bucket (at most 19%
 * above the true value), capped at the largest value seen. */
struct usched_wakelat {
    uint64_t count;  /* wake-ups measured (about 1 in 16) */
    uint64_t p50_ns, p90_ns, p99_ns, max_ns;
    uint64_t reserved[4];
};
/* Fills *out for one CPU, or for all with cpu = -1. -EINVAL for a CPU out of
 * range, -ESRCH before usched_start. */
int usched_wakelat(usched_t *s, int cpu, struct usched_wakelat *out);

/* Names the calling fiber in traces (docs/trace.md): 1 to USCHED_NAME_MAX
 * printable characters, no quote or backslash (-EINVAL otherwise); -EPERM
 * outside a fiber. Without tracing it checks the name and does nothing. */
#define USCHED_NAME_MAX 63
int usched_set_name(const char *name);

/* Writes the trace recorded so far (the last trace_mb MiB of a flight
 * recorder) to path, while the scheduler runs (docs/trace.md): from any
 * thread or fiber (a fiber blocks its CPU while the file is written).
 * Returns 0, -EINVAL (NULL or empty), -ESRCH (not started), -ENODATA (not
 * tracing), or the error of creating or writing path. */
int usched_trace_dump(usched_t *s, const char *path);

/* ---- topology ------------------------------------------------------------- */

/* Loads a topology (input as the "topology" key, cpus as the "cpus" key) and
 * prints it to f in `format`: "tree", "dfly", "json", or "emulate" (the real
 * CPU each virtual CPU runs on under the "emulate" setting; a virtual
 * topology only). Nothing is printed on failure: -ENOENT (missing path),
 * -EINVAL (bad input, cpus or format; "emulate" of this machine). */
int usched_topo_print(FILE *f, const char *input, const char *cpus, const char *format);

/* Prints one line on the cgroup CPU quota a scheduler started on this
 * topology would obey (docs/quota.md): "quota: none: <why>", "quota:
 * ignored: <file and problem>", or the limit, its file, and the workers and
 * CPUs chosen. Errors as usched_topo_print. */
int usched_quota_print(FILE *f, const char *input, const char *cpus);

/* ---- blocking primitives ------------------------------------------------- */
/*
 * Channels, sleep, mutex, condition variable, semaphore and waitgroup, all
 * built on one wait-queue mechanism (docs/sync.md). A fiber that blocks
 * parks (its worker runs other fibers); the wake-up places it through the
 * policy, like any other wake-up.
 *
 * Outside threads (not fibers) may call every one of them: the thread itself
 * blocks (on a futex), so a plain thread can feed a channel that fibers read,
 * or take a mutex shared with fibers. usched_sleep_ns outside a fiber is
 * nanosleep.
 *
 * Errors: NULL or uninitialised/destroyed objects -EINVAL; destroying an
 * object that fibers or threads wait on -EBUSY; timed calls -ETIMEDOUT when
 * the time runs out (a timeout of 0 only checks). Timers fire on the CPU the
 * fiber blocked on, within the slack documented in docs/sync.md.
 */

/* Private wait-queue state embedded in the public primitives. Do not touch. */
struct usched__waitq {
    uint32_t lock;
    uint32_t nwaiters;
    void *head;
    void *tail;
};

/* Channels carry void * messages in FIFO order; each message is received
 * exactly once. capacity 0 is a rendezvous: send returns once a receiver has
 * the message. */
typedef struct usched_chan usched_chan_t;
int usched_chan_create(usched_chan_t **out, size_t capacity); /* 0 = rendezvous */
int usched_chan_send(usched_chan_t *c, void *msg);            /* -EPIPE once closed */
int usched_chan_recv(usched_chan_t *c, void **msg);           /* -EPIPE when closed and drained */
int usched_chan_try_send(usched_chan_t *c, void *msg);        /* -EAGAIN if it would block */
int usched_chan_try_recv(usched_chan_t *c, void **msg);       /* -EAGAIN if it would block */
int usched_chan_recv_timeout(usched_chan_t *c, void **msg, uint64_t timeout_ns); /* -ETIMEDOUT */
/* Closes: every waiting sender and receiver returns -EPIPE (a sender's
 * message was not delivered); buffered messages stay receivable. Closing
 * twice: -EPIPE. */
int usched_chan_close(usched_chan_t *c);
int usched_chan_destroy(usched_chan_t *c);                    /* -EBUSY while waited on */

/* Sleeps at least ns nanoseconds (0 yields). */
int usched_sleep_ns(uint64_t ns);

/* The structs below are complete so that they can be embedded; their fields
 * are private. Initialise with the _init call (a zeroed object is invalid). */

/* Mutex: FIFO hand-off under contention, a short spin before parking.
 * -EDEADLK when the owner locks it again, -EPERM when a non-owner unlocks
 * it, -EBUSY from trylock when held and from destroy when held or waited
 * on. */
typedef struct usched_mutex {
    uint32_t _state; /* LOCKED and WAITERS bits */
    uint32_t _magic;
    struct usched__waitq _wq;
    uint64_t _owner; /* identity of the holder, 0 when free */
    uint64_t _reserved[1];
} usched_mutex_t;

/* Condition variable: wait/timedwait need the mutex held (-EPERM if not),
 * release it while waiting and hold it again on return, timeout included. */
typedef struct usched_cond {
    struct usched__waitq _wq;
    uint32_t _magic;
    uint32_t _spare;
    uint64_t _reserved[1];
} usched_cond_t;

/* Counting semaphore; post hands a permit directly to the first waiter. */
typedef struct usched_sem {
    uint64_t _value;
    struct usched__waitq _wq;
    uint32_t _magic;
    uint32_t _spare;
    uint64_t _reserved[1];
} usched_sem_t;

/* Waitgroup: wait returns once the count is 0. add making it negative:
 * -EINVAL (the count is left unchanged). */
typedef struct usched_wg {
    int64_t _count;
    struct usched__waitq _wq;
    uint32_t _magic;
    uint32_t _spare;
    uint64_t _reserved[1];
} usched_wg_t;

int usched_mutex_init(usched_mutex_t *m);
int usched_mutex_destroy(usched_mutex_t *m);
int usched_mutex_lock(usched_mutex_t *m);
int usched_mutex_trylock(usched_mutex_t *m);
int usched_mutex_unlock(usched_mutex_t *m);

int usched_cond_init(usched_cond_t *c);
int usched_cond_destroy(usched_cond_t *c);
int usched_cond_wait(usched_cond_t *c, usched_mutex_t *m);
int usched_cond_timedwait(usched_cond_t *c, usched_mutex_t *m, uint64_t timeout_ns);
int usched_cond_signal(usched_cond_t *c);    /* wakes the longest waiter */
int usched_cond_broadcast(usched_cond_t *c); /* wakes every waiter */

int usched_sem_init(usched_sem_t *s, unsigned value);
int usched_sem_destroy(usched_sem_t *s);
int usched_sem_wait(usched_sem_t *s);
int usched_sem_post(usched_sem_t *s); /* -EOVERFLOW beyond 2^32 - 1 permits */

int usched_wg_init(usched_wg_t *w);
int usched_wg_destroy(usched_wg_t *w);
int usched_wg_add(usched_wg_t *w, int n);
int usched_wg_done(usched_wg_t *w); /* usched_wg_add(w, -1) */
int usched_wg_wait(usched_wg_t *w);

/* ---- I/O ----------------------------------------------------------------- */
/*
 * Fibers wait for sockets, pipes and other pollable fds without blocking
 * their CPU: a call that would block parks the fiber, the CPU runs other
 * fibers, and the fiber is woken through the placement policy when the fd is
 * ready (docs/io.md). Regular files, which cannot be polled, are read and
 * written on the offload pool.
 *
 * Every call returns a count, or 0 on success, or a negative errno; none sets
 * errno and none raises SIGPIPE (a write to a closed peer returns -EPIPE).
 * timeout_ns: 0 only tries (-EAGAIN instead of waiting), USCHED_FOREVER
 * waits without a limit, any other value returns -ETIMEDOUT once that many
 * nanoseconds have passed. Data that arrives as a timeout fires stays in the
 * fd for the next call. Called from a plain thread (not a fiber), each call
 * blocks that thread, with the same results.
 *
 * usched changes no flag of an fd it did not create (the flags are shared
 * with every copy of the fd: stdin with the shell...): other sockets are
 * used with MSG_DONTWAIT, other blocking pipes, ttys and devices are polled
 * before each call, which then moves at most PIPE_BUF bytes; only
 * usched_accept and usched_connect set O_NONBLOCK on the socket they are
 * given (docs/io.md). An fd used with these calls must be closed with
 * usched_close (as Go's os.File is closed through the runtime), so that
 * waiters are woken and a reused fd number starts afresh; fds returned by
 * usched_accept and usched_socket start afresh in any case. An fd is
 * watched by the poller of the scheduler whose fiber first waited on it,
 * made on the first wait (-EMFILE/-ENOMEM if it cannot be).
 */
#define USCHED_FOREVER UINT64_MAX

/* Reads up to len bytes: >0 bytes read, 0 at end of file. */
ssize_t usched_read(int fd, void *buf, size_t len, uint64_t timeout_ns);
/* Writes all len bytes. If an error or the timeout stops it after some bytes,
 * returns the count written; a negative errno only when nothing was. */
ssize_t usched_write(int fd, const void *buf, size_t len, uint64_t timeout_ns);
ssize_t usched_readv(int fd, const struct iovec *iov, int iovcnt, uint64_t timeout_ns);
ssize_t usched_writev(int fd, const struct iovec *iov, int iovcnt, uint64_t timeout_ns); /* all, as write */
/* recv/send flags as recv(2)/send(2); MSG_NOSIGNAL is always added to send. */
ssize_t usched_recv(int fd, void *buf, size_t len, int flags, uint64_t timeout_ns);
ssize_t usched_send(int fd, const void *buf, size_t len, int flags, uint64_t timeout_ns); /* all, as write */
/* Datagram calls: one message each (sendto sends it whole or fails). */
ssize_t usched_recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *addr,
                        socklen_t *addrlen, uint64_t timeout_ns);
ssize_t usched_sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *addr,
                      socklen_t addrlen, uint64_t timeout_ns);
/* Accepts a connection; the new fd is non-blocking and close-on-exec. addr
 * and addrlen may be NULL. */
int usched_accept(int lfd, struct sockaddr *addr, socklen_t *addrlen, uint64_t timeout_ns);
/* Connects fd; 0 once connected, the connection's error (-ECONNREFUSED...)
 * otherwise. After -ETIMEDOUT the socket is left half-connected: close it.
 * With timeout 0, as connect(2): -EINPROGRESS, then usched_poll_fd(POLLOUT)
 * and SO_ERROR give the result; -EAGAIN on a full UNIX backlog. */
int usched_connect(int fd, const struct sockaddr *addr, socklen_t addrlen, uint64_t timeout_ns);
/* A socket(2) that is non-blocking and close-on-exec. */
int usched_socket(int domain, int type, int protocol);
/* Waits until fd is ready for events (POLLIN, POLLOUT or both); returns the
 * ready events (POLLIN, POLLOUT, POLLHUP, POLLERR), -EAGAIN for timeout 0 when
 * none is. */
int usched_poll_fd(int fd, short events, uint64_t timeout_ns);
/* Fibers blocked on fd return -EBADF promptly (outside threads within
 * 10 ms); then the fd is closed. A call that starts meanwhile fails with
 * -EBADF. Returns close(2)'s result. */
int usched_close(int fd);
/* Runs fn(arg) on a thread of the offload pool while the calling fiber parks
 * and its CPU runs other fibers: for blocking calls without readiness
 * (regular files, getaddrinfo, fsync, a library that blocks). The pool grows
 * on demand up to the offload_max knob and shrinks when idle; a job waits
 * for a busy thread when the bound is reached or a new thread cannot be
 * made, and is never left without one. usched_destroy waits for calls in
 * flight. Outside a fiber, calls fn(arg) directly. -EINVAL for a NULL fn,
 * -EAGAIN or -ENOMEM if the pool has no thread and none could be created
 * (fn was not called). */
int usched_offload(void (*fn)(void *), void *arg);

/* ---- policies and knobs ---------------------------------------------------- */
/* The placement policies (`usched policies`) and the knobs (`usched knobs`),
 * for listing. Policies are chosen with usched_set(s, "policy", name) or
 * USCHED_POLICY; knobs are set with usched_set(s, "knobs", "smt=0,affine=1"),
 * USCHED_KNOBS or the CLI. Policy authors: include/usched/policy.h. */

/* Number of policies (built-in and registered), and the name and one-line
 * description of the i-th; NULL when i is out of range. */
int usched_policy_count(void);
const char *usched_policy_name(int i);
const char *usched_policy_brief(int i);

/* One knob, as described in the knob table. */
struct usched_knob_info {
    const char *name;     /* as in "name=value" */
    const char *type;     /* "bool", "int" or "level" (core, l2, llc, package, numa, machine) */
    int64_t def, min, max;
    int runtime;          /* 1: may change while the scheduler runs */
    const char *policies; /* comma list of the policies that read it, or "all" */
    const char *desc;
    char def_text[16];    /* the default as it is written ("1", "machine") */
    char range_text[48];  /* "0..1", "core..machine" */
    uint64_t reserved[4];
};

/* Number of knobs; description of the i-th (-EINVAL when out of range). */
int usched_knob_count(void);
int usched_knob_info(int i, struct usched_knob_info *out);

/* Current value of a knob of scheduler s (levels as numbers, core = 0).
 * -EINVAL for an unknown name. */
int usched_knob_get(usched_t *s, const char *name, int64_t *value);

#ifdef __cplusplus
}
#endif
#endif /* USCHED_H */
