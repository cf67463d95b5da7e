/*
 * Private to src/io: the poller instance of a scheduler, the per-fd state
 * and the waits built on them.
 */
#ifndef USCHED_IO_IMPL_H
#define USCHED_IO_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"
#include "core/park.h"
#include "sync/waitq.h"

/* Events read per epoll call: a blocking poll takes up to IO_EVENTS (Go
 * reads 128), a busy CPU's poll fewer, since it runs on a fiber's stack. */
#define IO_EVENTS 128
#define IO_EVENTS_BUSY 32

/* An outside thread waiting on an fd polls in slices this long, so that it
 * sees usched_close within this time. */
#define IO_THREAD_SLICE_MS 10

/* Per-CPU poll bookkeeping, owner worker only. */
struct usched__io_cpu {
    uint32_t picks;     /* picks since this CPU last polled while busy */
    int nev;            /* events buffered by io_park */
    uint64_t defer_ns;    /* length of this CPU's current poller deferral, 0 none */
    uint64_t defer_start; /* when it began */
    struct epoll_event *ev;
} __attribute__((aligned(64)));

/* One epoll set: the scheduler's only one (io_poller=shared) or one CPU's
 * (io_poller=percpu; set c is CPU c's, and only CPU c blocks in it). */
struct usched__ioset {
    int epfd;                     /* the epoll instance */
    int evfd;                     /* eventfd in epfd: breaks a blocked poll (W3') */
    int tfd;                      /* timerfd in epfd for far deadlines (io_park) */
    _Atomic uint64_t tfd_at;      /* its expiry, UINT64_MAX disarmed; written by the role holder */
    _Atomic int32_t poller;       /* CPU holding the role (blocked in it or about to be), -1 none */
    _Atomic uint32_t polling;     /* a non-blocking poll is running (one at a time) */
    _Atomic uint32_t wake_sig;    /* an eventfd write is outstanding (B1-B4) */
    _Atomic uint32_t nwaiters;    /* fibers parked on the fds registered here */
    _Atomic uint64_t last_poll_ns;
} __attribute__((aligned(64)));

/* The poller instance of a scheduler, created on its first I/O wait. */
struct usched__io {
    usched_t *s;
    uint64_t id;                  /* never 0; tags the fds registered here */
    bool percpu;                  /* io_poller=percpu: a set per CPU */
    int nsets;                    /* 1, or ncpus */
    struct usched__ioset *set;    /* nsets entries */
    _Atomic int poll_err;         /* the first errno epoll_wait failed with, 0 none (said once) */
    struct usched__io_cpu *cpu;   /* ncpus entries */
};

/* Fibers waiting on descriptors, in every set (a sum of counts that may
 * each move meanwhile: for tests and reports). */
static inline uint32_t usched__io_nwaiters(struct usched__io *io)
{
    uint32_t n = 0;
    for (int i = 0; i < io->nsets; i++) n += atomic_load_explicit(&io->set[i].nwaiters, memory_order_relaxed);
    return n;
}

/* The set CPU c blocks in and registers its fds in. */
static inline struct usched__ioset *usched__io_set_of(struct usched__io *io, int c)
{
    return &io->set[io->percpu ? c : 0];
}

enum { PD_UNKNOWN = 0, PD_POLL, PD_FILE };
enum { IO_RD = 0, IO_WR = 1, IO_ANY = 2 }; /* wait directions (IO_ANY: either) */
#define PD_DRAINED (1ull << 32)

/*
 * Per-fd state, indexed by fd number in a slab of chunks that are never
 * freed (type-stable: an event for a closed fd still finds valid memory, and
 * its sequence tag tells it is stale).
 */
struct usched__pd {
    struct usched__waitq q[3];   /* waiters: IO_RD, IO_WR, IO_ANY. q[0].lock guards the pd */
    _Atomic uint32_t ev[2];      /* readiness events per direction (written under the lock) */
    _Atomic uint64_t drained[2]; /* PD_DRAINED | ev when a short read/write emptied it */
    _Atomic uint32_t refs;       /* calls in progress (usched_close waits for 0) */
    _Atomic uint32_t closing;    /* usched_close in progress */
    _Atomic uint32_t seq;        /* incarnation: tags epoll_data (under the lock) */
    _Atomic uint32_t kind;       /* PD_* (under the lock) */
    _Atomic uint64_t io_id;      /* poller it is registered with, 0 none */
    _Atomic int32_t home;        /* the set it is registered in (io_poller=percpu: its CPU) */
    uint8_t away;                /* waits in a row on another CPU than home, or packets there (percpu) */
    uint8_t sample;              /* waits since the packets' CPU was last read (percpu, TCP) */
    _Atomic uint32_t hup;        /* a hang-up, error or urgent data was reported: never trust "drained" */
    /* Set by classify or usched__pd_fresh under the lock, read without it by
     * the calls that follow (ordered by the release store of kind): */
    uint8_t stream;              /* a stream (TCP, UNIX stream, pipe): a short write proves it full */
    uint8_t tcp;                 /* a TCP socket: a plain short read proves it empty */
    uint8_t sock;                /* a socket: calls use send/recv with MSG_DONTWAIT (and MSG_NOSIGNAL) */
    uint8_t nonblock;            /* O_NONBLOCK is on (usched made the fd, or it came so) */
    uint8_t pollfirst;           /* a blocking pipe, tty or device usched did not create: poll(2) it
                                  * before each call, which then cannot block (docs/io.md) */
};

/* fd.c */
#define USCHED__PD_MAX_FD (1 << 22) /* beyond the hard RLIMIT_NOFILE of common systems (2^20) */
struct usched__pd *usched__pd_get(int fd); /* NULL if fd is out of range or no memory */
void usched__pd_fresh(int fd);            /* a new fd from accept/socket */
/* Registers fd with io (NULL: an outside thread, classify only): PD_POLL,
 * PD_FILE or a negative errno. */
int usched__pd_prepare(struct usched__pd *pd, int fd, struct usched__io *io);
uint32_t usched__pd_ev(struct usched__pd *pd, int dir); /* events seen in direction dir */
void usched__pd_lock(struct usched__pd *pd);
void usched__pd_unlock(struct usched__pd *pd);
/* A call in progress on fd (F2 in fd.c): takes the reference, or returns
 * -EBADF while usched_close retires the fd; usched__pd_exit drops it. */
int usched__pd_enter(struct usched__pd *pd);
void usched__pd_exit(struct usched__pd *pd);
/* Makes a socket usched did not create non-blocking for accept/connect. */
int usched__pd_set_nonblock(struct usched__pd *pd, int fd);
/* Waits for an event in direction dir after `seen` (usched__pd_ev before the
 * syscall): 0 (retry), -ETIMEDOUT (deadline, CLOCK_MONOTONIC ns), -EBADF
 * (usched_close). */
int usched__pd_wait(struct usched__pd *pd, int fd, int dir, uint32_t seen, uint64_t deadline);
/* Adds fd to set `set` of io (EPOLL_CTL_ADD, or MOD when it is there):
 * 0 or -errno (errno kept). */
int usched__io_add(struct usched__io *io, int set, int fd, uint32_t seq);
void usched__pd_ready(struct usched__pd *pd, uint32_t seq, uint32_t events);
int usched__pd_close(struct usched__pd *pd, int fd);

/* poller.c */
/* The set an fd is first registered in under io_poller=percpu: the
 * policy's io_home answer, else the CPU the socket's packets arrive on
 * (SO_INCOMING_CPU of a TCP socket, when the workers are pinned and one runs
 * there), else the CPU of worker me (0 from an outside thread, me NULL: the
 * policy is not asked). */
int usched__io_home_pick(struct usched__io *io, int fd, bool tcp, struct usched__wk *me);
/* The worker that runs on the CPU a TCP socket's packets last arrived on,
 * -1 when not known. */
int usched__io_packet_cpu(struct usched__io *io, int fd);
/* The poller of s, created on first use: 0, or -ENOMEM/-EMFILE/-ENFILE
 * when it cannot be created (the cause in usched_last_error). */
int usched__io_get(usched_t *s, struct usched__io **out);
/* Registers the "epoll shared" park backend with the core (once; the
 * library's load does it). A file of src/io that the core must finish at
 * usched_destroy through the backend's fini (the offload pool) calls it,
 * so that a static link that takes that file also takes this one, and its
 * registration at load with it. */
void usched__io_register(void);

/* offload.c */
int usched__offload_run(void (*fn)(void *), void *arg);
int usched__offload_threads(void); /* pool threads alive (tests) */
void usched__offload_quiesce(void); /* waits until no pool thread is inside a wake-up */

#endif
