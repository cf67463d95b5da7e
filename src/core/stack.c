/*
 * Fiber stacks: reserved address space, carved from big chunks, guarded
 * within a mapping budget, canaried beyond it, reused through a locked LIFO.
 *
 * Goal (issue #3): one million idle fibers alive at once on a stock machine,
 * each costing about one resident page plus its descriptor. The obstacles:
 *  - resident memory: stacks are mmap(MAP_NORESERVE) and never touched by
 *    the allocator, so a stack costs only the pages its fiber touched (an
 *    idle fiber: the top page holding its initial frame);
 *  - mappings: vm.max_map_count is 65,530 by default and every mprotect
 *    guard page in the middle of a mapping splits it in three. One mapping
 *    per stack, let alone two per guard, cannot reach a million.
 *
 * Layout. A pool per usable size (page-rounded). A pool grows by chunks of
 * slots; a slot is one gap page followed by the usable stack:
 *
 *     chunk: [gap|stack 0][gap|stack 1] ... [gap|stack n-1]
 *
 * The gap page is the guard page or holds the canary. How it is guarded is
 * decided per chunk, in this order:
 *  1. light guard: madvise(MADV_GUARD_INSTALL) (Linux 6.13+) marks the gap
 *     in the page tables; it faults like PROT_NONE but splits no mapping,
 *     survives MADV_DONTNEED, and costs a page-table entry. Every stack is
 *     guarded and a chunk is one mapping. Probed once.
 *  2. mprotect guard: while mappings spent stay within the budget (default:
 *     half of max_map_count, the rest is the process's), chunks of 64 stacks
 *     get PROT_NONE gaps, counted as 2 mappings per stack + 1.
 *  3. canary: beyond the budget the gap stays an ordinary, never-touched
 *     page. Its top CANARY_BYTES (just below the stack) must read as zero;
 *     usched__stack_check (called by the core when a fiber switches out)
 *     aborts if they do not. The canary is zero, not random, so that it
 *     costs no resident memory: reading an untouched page maps the shared
 *     zero page. An overflow writes return addresses and saved registers
 *     into the band, so the blind spot is an overflow that writes a whole
 *     cache line of zeros and nothing else there; a small overflow (< one
 *     page) stays inside the gap and corrupts no neighbour.
 * Unguarded and light-guarded chunks grow from 64 stacks to 1,024 (at most
 * 64 MiB), so a million 64 KiB stacks take about 1,100 mappings.
 *
 * Free list. Per pool, a LIFO array under a mutex (pop/push are a few
 * instructions; the core keeps a per-CPU cache in front, so the lock is
 * rarely contended). Its capacity is reserved when a chunk is made, so the
 * free path never allocates. LIFO hands out the most recently used stack,
 * whose pages are still resident and warm: reusing them is free. Freeing
 * never makes a system call: an madvise per free made fork-join workloads
 * (fib) several times slower here, each one a TLB shootdown IPI to every
 * CPU of the process. Instead usched__stack_trim() returns the pages of the
 * coldest free stacks beyond `dirty_max` (4,096 for 64 KiB stacks, at most
 * 256 MiB of stacks) with MADV_DONTNEED; workers trim a few each time they
 * park, so memory comes back after a burst once the scheduler goes idle.
 * Chunks are never unmapped (address space is cheap; pages are what
 * matters).
 *
 * Overflow reports. A SIGSEGV/SIGBUS handler on an alternate signal stack
 * (per worker thread) compares the fault address with the guard page of
 * the fiber published by usched__stack_set_current on that thread; a hit
 * prints "usched: stack overflow in fiber <id> (stack <size> bytes)" and
 * aborts. Any other fault goes to the previous handler, or, if that was the
 * default, the default is restored and the fault recurs and kills as usual.
 *
 * Rejected: one mmap per stack (a million mappings); guard pages for all
 * stacks by raising vm.max_map_count (needs root, and every mapping costs
 * kernel memory); random canaries (an extra resident page per stack);
 * a lock-free Treiber stack (needs ABA tags or hazard handling for no gain
 * behind the per-CPU caches).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/fault.h"
#include "base/error.h"
#include "base/export.h"
#include "core/stack.h"

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

enum {
    MAX_POOLS = 64,           /* distinct stack sizes in use */
    GUARDED_CHUNK = 64,       /* stacks per mprotect-guarded chunk */
    FIRST_CHUNK = 64,         /* stacks in a pool's first other chunk */
    MAX_CHUNK = 1024,         /* ... doubling up to this */
    CANARY_BYTES = 64,        /* zero band below an unguarded stack */
    DIRTY_MAX = 4096,         /* free stacks kept with their pages */
    DEFAULT_MAP_MAX = 65530,  /* vm.max_map_count default */
};
#define CHUNK_BYTES_MAX ((size_t)64 << 20)
#define DIRTY_BYTES_MAX ((size_t)256 << 20)
#define STACK_MAX ((size_t)1 << 30)
#define ALT_STACK_MIN ((size_t)64 << 10)

#define E_GUARDED ((uintptr_t)1) /* free-list entry: lo | flags */

struct pool {
    _Atomic size_t size;       /* usable bytes; 0 = free slot. Written once
                                * under pools_lock (release), read anywhere */
    pthread_mutex_t lock;      /* protects ent, nfree, cap, total */
    uintptr_t *ent;            /* free stacks, LIFO */
    _Atomic size_t nfree;      /* written under lock, read racily by free */
    size_t cap, total;         /* ent capacity; stacks ever made */
    size_t next_chunk;         /* stacks in the next unguarded chunk (grow) */
    size_t dirty_max;          /* free stacks kept resident by a trim */
    _Atomic size_t nclean;     /* ent[0, nclean) were released (under lock) */
    pthread_mutex_t grow;      /* one chunk creation at a time */
};

static struct {
    pthread_once_t once;
    size_t page;
    long default_budget;
    _Atomic long budget;
    _Atomic int guard_mode;
    _Atomic int light;         /* -1 unknown, 0 no, 1 MADV_GUARD_INSTALL works */
    _Atomic long mappings, chunks, guarded, unguarded, released;
    pthread_mutex_t pools_lock;
    struct pool pools[MAX_POOLS];
} S = {
    .once = PTHREAD_ONCE_INIT,
    .budget = -1,
    .light = -1,
    .pools_lock = PTHREAD_MUTEX_INITIALIZER,
};

/* ---- overflow report (async-signal-safe) --------------------------------- */

static char *put_str(char *p, const char *s)
{
    while (*s)
        *p++ = *s++;
    return p;
}

static char *put_u64(char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    while (n)
        *p++ = tmp[--n];
    return p;
}

__attribute__((noreturn)) static void report_overflow(uint64_t fiber_id, size_t size)
{
    char buf[128], *p = buf;
    p = put_str(p, "usched: stack overflow in fiber ");
    p = put_u64(p, fiber_id);
    p = put_str(p, " (stack ");
    p = put_u64(p, size);
    p = put_str(p, " bytes)\n");
    ssize_t r = write(STDERR_FILENO, buf, (size_t)(p - buf));
    (void)r;
    abort();
}

/* ---- setup ---------------------------------------------------------------- */

static long read_map_max(void)
{
    char buf[32];
    int fd = open("/proc/sys/vm/max_map_count", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return DEFAULT_MAP_MAX;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return DEFAULT_MAP_MAX;
    buf[n] = 0;
    long v = strtol(buf, NULL, 10);
    return v > 0 ? v : DEFAULT_MAP_MAX;
}

static void setup(void)
{
    S.page = (size_t)sysconf(_SC_PAGESIZE);
    S.default_budget = read_map_max() / 2;
    long expect = -1;
    atomic_compare_exchange_strong(&S.budget, &expect, S.default_budget);
}

static size_t page_size(void)
{
    pthread_once(&S.once, setup);
    return S.page;
}

static int light_guards(void)
{
    int l = atomic_load_explicit(&S.light, memory_order_relaxed);
    if (l >= 0)
        return l;
    size_t pg = page_size();
    char *p = usched__mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    l = 0;
    if (p != MAP_FAILED) {
        l = madvise(p, pg, MADV_GUARD_INSTALL) == 0;
        munmap(p, 2 * pg);
    }
    atomic_store_explicit(&S.light, l, memory_order_relaxed);
    return l;
}

void usched__stack_set_guard_mode(int mode)
{
    if (mode < USCHED__STACK_GUARD_AUTO || mode > USCHED__STACK_GUARD_NONE)
        mode = USCHED__STACK_GUARD_AUTO;
    atomic_store(&S.guard_mode, mode);
}

void usched__stack_set_budget(long mappings)
{
    page_size();
    atomic_store(&S.budget, mappings < 0 ? S.default_budget : mappings);
}

void usched__stack_get_stats(struct usched__stack_stats *out)
{
    page_size();
    long nfree = 0;
    for (int i = 0; i < MAX_POOLS; i++)
        if (atomic_load_explicit(&S.pools[i].size, memory_order_acquire))
            nfree += (long)atomic_load_explicit(&S.pools[i].nfree, memory_order_relaxed);
    *out = (struct usched__stack_stats){
        .budget = atomic_load(&S.budget),
        .mappings = atomic_load(&S.mappings),
        .chunks = atomic_load(&S.chunks),
        .guarded = atomic_load(&S.guarded),
        .unguarded = atomic_load(&S.unguarded),
        .free = nfree,
        .released = atomic_load(&S.released),
        .light_guards = light_guards(),
    };
}

/* ---- pools ---------------------------------------------------------------- */

static struct pool *pool_find(size_t size)
{
    for (int i = 0; i < MAX_POOLS; i++) {
        size_t s = atomic_load_explicit(&S.pools[i].size, memory_order_acquire);
        if (s == size)
            return &S.pools[i];
        if (s == 0)
            break; /* slots fill in order */
    }
    return NULL;
}

static struct pool *pool_get(size_t size)
{
    struct pool *p = pool_find(size);
    if (p)
        return p;
    pthread_mutex_lock(&S.pools_lock);
    p = pool_find(size);
    for (int i = 0; !p && i < MAX_POOLS; i++) {
        struct pool *q = &S.pools[i];
        if (atomic_load_explicit(&q->size, memory_order_relaxed))
            continue;
        pthread_mutex_init(&q->lock, NULL);
        pthread_mutex_init(&q->grow, NULL);
        q->next_chunk = FIRST_CHUNK;
        q->dirty_max = DIRTY_BYTES_MAX / size;
        if (q->dirty_max > DIRTY_MAX)
            q->dirty_max = DIRTY_MAX;
        if (q->dirty_max < 64)
            q->dirty_max = 64;
        atomic_store_explicit(&q->size, size, memory_order_release); /* pairs with pool_find */
        p = q;
    }
    pthread_mutex_unlock(&S.pools_lock);
    return p;
}

static int pool_pop(struct pool *p, usched__stack_t *out)
{
    int got = 0;
    pthread_mutex_lock(&p->lock);
    size_t n = atomic_load_explicit(&p->nfree, memory_order_relaxed);
    if (n) {
        uintptr_t e = p->ent[n - 1];
        atomic_store_explicit(&p->nfree, n - 1, memory_order_relaxed);
        if (atomic_load_explicit(&p->nclean, memory_order_relaxed) > n - 1)
            atomic_store_explicit(&p->nclean, n - 1, memory_order_relaxed);
        out->lo = (void *)(e & ~(uintptr_t)(S.page - 1));
        out->size = atomic_load_explicit(&p->size, memory_order_relaxed);
        out->guarded = (e & E_GUARDED) != 0;
        got = 1;
    }
    pthread_mutex_unlock(&p->lock);
    return got;
}

/* Caller holds p->lock; capacity was reserved when the chunk was made. */
static void pool_push_locked(struct pool *p, void *lo, int guarded)
{
    size_t n = atomic_load_explicit(&p->nfree, memory_order_relaxed);
    if (n >= p->cap) {
        static const char msg[] = "usched: stack free list overflow (a stack freed twice?)\n";
        ssize_t r = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)r;
        abort();
    }
    p->ent[n] = (uintptr_t)lo | (guarded ? E_GUARDED : 0);
    atomic_store_explicit(&p->nfree, n + 1, memory_order_relaxed);
}

enum guard_kind { G_NONE, G_LIGHT, G_MPROTECT };

static enum guard_kind chunk_kind(void)
{
    int mode = atomic_load(&S.guard_mode);
    long budget = atomic_load(&S.budget);
    if (mode == USCHED__STACK_GUARD_NONE || budget <= 0)
        return G_NONE;
    if (mode == USCHED__STACK_GUARD_AUTO && light_guards())
        return G_LIGHT;
    /* A guarded chunk costs 2 mappings per stack + 1; keep 1/16 of the
     * budget for the unguarded chunks that come after. */
    long cost = 2 * GUARDED_CHUNK + 1;
    if (atomic_load(&S.mappings) + cost <= budget - budget / 16)
        return G_MPROTECT;
    return G_NONE;
}

/* Maps a chunk, hands out its first stack in *out and frees the rest into
 * the pool. Caller holds p->grow. */
static int pool_grow(struct pool *p, usched__stack_t *out)
{
    size_t pg = S.page, size = atomic_load_explicit(&p->size, memory_order_relaxed);
    size_t slot = pg + size;
    enum guard_kind kind = chunk_kind();
    size_t n = kind == G_MPROTECT ? GUARDED_CHUNK : p->next_chunk;
    if (n > CHUNK_BYTES_MAX / slot)
        n = CHUNK_BYTES_MAX / slot;
    if (n > MAX_CHUNK)
        n = MAX_CHUNK;
    if (n < 1)
        n = 1;

    pthread_mutex_lock(&p->lock);
    if (p->cap < p->total + n) {
        size_t cap = (p->total + n) * 2;
        uintptr_t *ent = usched__realloc(p->ent, cap * sizeof *ent);
        if (!ent) {
            pthread_mutex_unlock(&p->lock);
            return usched__error(ENOMEM, "stack free list of %zu entries: out of memory", cap);
        }
        p->ent = ent;
        p->cap = cap;
    }
    pthread_mutex_unlock(&p->lock);

    char *base = usched__mmap(NULL, n * slot, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        int e = errno;
        return usched__error(e, "stack chunk of %zu stacks of %zu bytes: mmap: %s",
                             n, size, strerror(e));
    }
    atomic_fetch_add(&S.mappings, 1);
    atomic_fetch_add(&S.chunks, 1);

    unsigned char guarded[MAX_CHUNK];
    long nguarded = 0;
    for (size_t i = 0; i < n; i++) {
        char *gap = base + i * slot;
        int ok = 0;
        if (kind == G_LIGHT)
            ok = madvise(gap, pg, MADV_GUARD_INSTALL) == 0;
        else if (kind == G_MPROTECT && mprotect(gap, pg, PROT_NONE) == 0) {
            ok = 1;
            atomic_fetch_add(&S.mappings, 2);
        }
        guarded[i] = (unsigned char)ok;
        nguarded += ok;
    }
    atomic_fetch_add(&S.guarded, nguarded);
    atomic_fetch_add(&S.unguarded, (long)n - nguarded);
    if (kind != G_MPROTECT && p->next_chunk < MAX_CHUNK)
        p->next_chunk *= 2;

    pthread_mutex_lock(&p->lock);
    p->total += n;
    /* Highest address first out of the LIFO: stack 0 goes to the caller,
     * then 1, 2, ... in address order. */
    for (size_t i = n; i-- > 1;)
        pool_push_locked(p, base + i * slot + pg, guarded[i]);
    pthread_mutex_unlock(&p->lock);

    out->lo = base + pg;
    out->size = size;
    out->guarded = guarded[0];
    return 0;
}

/* ---- public (internal) API ------------------------------------------------- */

int usched__stack_alloc(size_t size, usched__stack_t *out)
{
    size_t pg = page_size();
    if (size == 0 || size > STACK_MAX)
        return usched__error(EINVAL, "stack size %zu: must be 1..%zu bytes", size, STACK_MAX);
    size = (size + pg - 1) & ~(pg - 1);
    if (size < 2 * pg)
        size = 2 * pg;
    struct pool *p = pool_get(size);
    if (!p)
        return usched__error(ENOMEM, "stack size %zu: more than %d distinct stack sizes in use",
                             size, MAX_POOLS);
    if (pool_pop(p, out))
        return 0;
    pthread_mutex_lock(&p->grow);
    int r = pool_pop(p, out) ? 0 : pool_grow(p, out);
    pthread_mutex_unlock(&p->grow);
    return r;
}

void usched__stack_free(usched__stack_t *st)
{
    if (!st->lo)
        return;
    struct pool *p = pool_find(st->size);
    if (!p || ((uintptr_t)st->lo & (S.page - 1))) {
        static const char msg[] = "usched: stack_free: not a stack of this allocator\n";
        ssize_t r = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)r;
        abort();
    }
    pthread_mutex_lock(&p->lock);
    pool_push_locked(p, st->lo, st->guarded);
    pthread_mutex_unlock(&p->lock);
    st->lo = NULL;
}

int usched__stack_alloc_many(size_t size, usched__stack_t *out, int n)
{
    if (n <= 0)
        return usched__error(EINVAL, "stack_alloc_many: count %d", n);
    int r = usched__stack_alloc(size, &out[0]); /* validates, grows if empty */
    if (r < 0)
        return r;
    struct pool *p = pool_find(out[0].size);
    int got = 1;
    pthread_mutex_lock(&p->lock);
    size_t nf = atomic_load_explicit(&p->nfree, memory_order_relaxed);
    size_t size_pg = atomic_load_explicit(&p->size, memory_order_relaxed);
    while (got < n && nf) {
        uintptr_t e = p->ent[--nf];
        out[got].lo = (void *)(e & ~(uintptr_t)(S.page - 1));
        out[got].size = size_pg;
        out[got].guarded = (e & E_GUARDED) != 0;
        got++;
    }
    atomic_store_explicit(&p->nfree, nf, memory_order_relaxed);
    if (atomic_load_explicit(&p->nclean, memory_order_relaxed) > nf)
        atomic_store_explicit(&p->nclean, nf, memory_order_relaxed);
    pthread_mutex_unlock(&p->lock);
    return got;
}

void usched__stack_free_many(usched__stack_t *st, int n)
{
    if (n <= 0)
        return;
    struct pool *p = pool_find(st[0].size);
    for (int i = 0; i < n; i++) {
        if (!p || st[i].size != st[0].size || !st[i].lo || ((uintptr_t)st[i].lo & (S.page - 1))) {
            static const char msg[] = "usched: stack_free_many: not stacks of one size from this allocator\n";
            ssize_t r = write(STDERR_FILENO, msg, sizeof msg - 1);
            (void)r;
            abort();
        }
    }
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < n; i++) {
        pool_push_locked(p, st[i].lo, st[i].guarded);
        st[i].lo = NULL;
    }
    pthread_mutex_unlock(&p->lock);
}

long usched__stack_trim(long keep, long max)
{
    long done = 0;
    for (int i = 0; i < MAX_POOLS && (max < 0 || done < max); i++) {
        struct pool *p = &S.pools[i];
        size_t size = atomic_load_explicit(&p->size, memory_order_acquire);
        if (!size)
            break;
        size_t k = keep < 0 ? p->dirty_max : (size_t)keep;
        /* Cheap check first: nothing to do is the common case. */
        size_t nf = atomic_load_explicit(&p->nfree, memory_order_relaxed);
        if (nf <= k || atomic_load_explicit(&p->nclean, memory_order_relaxed) >= nf - k)
            continue;
        pthread_mutex_lock(&p->lock);
        nf = atomic_load_explicit(&p->nfree, memory_order_relaxed);
        size_t c = atomic_load_explicit(&p->nclean, memory_order_relaxed);
        /* The coldest free stacks sit at the bottom of the LIFO; under the
         * lock nobody can pop them while their pages go. */
        while (nf > k && c < nf - k && (max < 0 || done < max)) {
            void *lo = (void *)(p->ent[c] & ~(uintptr_t)(S.page - 1));
            madvise(lo, size, MADV_DONTNEED);
            c++;
            done++;
        }
        atomic_store_explicit(&p->nclean, c, memory_order_relaxed);
        pthread_mutex_unlock(&p->lock);
    }
    atomic_fetch_add_explicit(&S.released, done, memory_order_relaxed);
    return done;
}

void usched__stack_check(const usched__stack_t *st, uint64_t fiber_id)
{
    if (st->guarded)
        return;
    const volatile uint64_t *c = (const volatile uint64_t *)((const char *)st->lo - CANARY_BYTES);
    uint64_t x = 0;
    for (int i = 0; i < CANARY_BYTES / 8; i++)
        x |= c[i];
    if (__builtin_expect(x != 0, 0))
        report_overflow(fiber_id, st->size);
}

/* ---- guard-page fault reporting ------------------------------------------- */

static USCHED_TLS const usched__stack_t *cur_stack;
static USCHED_TLS uint64_t cur_fiber;
static USCHED_TLS void *alt_mem;
static USCHED_TLS size_t alt_len;

static pthread_once_t handler_once = PTHREAD_ONCE_INIT;
static int handler_err;
static struct sigaction old_segv, old_bus;

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    const usched__stack_t *st = cur_stack;
    if (st && st->guarded) {
        uintptr_t a = (uintptr_t)si->si_addr, lo = (uintptr_t)st->lo;
        if (a < lo && a >= lo - S.page)
            report_overflow(cur_fiber, st->size);
    }
    /* Not ours: hand over to whoever handled it before. */
    struct sigaction *old = sig == SIGSEGV ? &old_segv : &old_bus;
    if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
        old->sa_sigaction(sig, si, uc);
        return;
    }
    if (!(old->sa_flags & SA_SIGINFO) && old->sa_handler != SIG_DFL &&
        old->sa_handler != SIG_IGN) {
        old->sa_handler(sig);
        return;
    }
    /* Default action: restore it; a real fault recurs when we return and
     * kills the process as if we had never been here; a sent signal (kill,
     * raise) is sent again. */
    struct sigaction dfl = { .sa_handler = SIG_DFL };
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    if (si->si_code <= 0)
        raise(sig);
}

static void install_handlers(void)
{
    struct sigaction sa = { .sa_sigaction = on_fault, .sa_flags = SA_SIGINFO | SA_ONSTACK };
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &old_segv) != 0 || sigaction(SIGBUS, &sa, &old_bus) != 0)
        handler_err = errno;
}

int usched__stack_thread_init(void)
{
    size_t pg = page_size();
    pthread_once(&handler_once, install_handlers);
    if (handler_err)
        return usched__error(handler_err, "stack overflow handler: sigaction: %s",
                             strerror(handler_err));
    if (alt_mem)
        return 0;
    stack_t cur;
    if (sigaltstack(NULL, &cur) == 0 && !(cur.ss_flags & SS_DISABLE) &&
        cur.ss_size >= ALT_STACK_MIN)
        return 0; /* the thread has a big enough one (e.g. from a sanitizer) */
    size_t len = ALT_STACK_MIN;
    long min = sysconf(_SC_SIGSTKSZ);
    if (min > 0 && (size_t)min * 4 > len)
        len = ((size_t)min * 4 + pg - 1) & ~(pg - 1);
    void *mem = usched__mmap(NULL, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) {
        int e = errno;
        return usched__error(e, "alternate signal stack of %zu bytes: mmap: %s", len, strerror(e));
    }
    stack_t ss = { .ss_sp = mem, .ss_size = len };
    if (sigaltstack(&ss, NULL) != 0) {
        int e = errno;
        munmap(mem, len);
        return usched__error(e, "sigaltstack: %s", strerror(e));
    }
    alt_mem = mem;
    alt_len = len;
    return 0;
}

void usched__stack_thread_fini(void)
{
    cur_stack = NULL;
    if (!alt_mem)
        return;
    stack_t ss = { .ss_flags = SS_DISABLE };
    sigaltstack(&ss, NULL);
    munmap(alt_mem, alt_len);
    alt_mem = NULL;
}

void usched__stack_set_current(const usched__stack_t *st, uint64_t fiber_id)
{
    cur_stack = st;
    cur_fiber = fiber_id;
}

/* ---- per-CPU cache ----------------------------------------------------------- */

int usched__stack_cache_get(usched__stack_cache_t *c, size_t size, usched__stack_t *out)
{
    if (!c) return usched__stack_alloc(size, out);
    if (!c->n) {
        int n = usched__stack_alloc_many(size, c->v, USCHED_STACK_CACHE / 4);
        if (n < 0) return n;
        c->n = n;
    }
    *out = c->v[--c->n];
    return 0;
}

void usched__stack_cache_put(usched__stack_cache_t *c, const usched__stack_t *st)
{
    if (!c) {
        usched__stack_t copy = *st;
        usched__stack_free(&copy);
        return;
    }
    if (c->n == USCHED_STACK_CACHE) {
        c->n -= USCHED_STACK_CACHE / 2;
        usched__stack_free_many(&c->v[c->n], USCHED_STACK_CACHE / 2);
    }
    c->v[c->n++] = *st;
}

void usched__stack_cache_trade(usched__stack_cache_t *c, usched__stack_t *st)
{
    if (!c->n) return;
    usched__stack_t warm = c->v[c->n - 1];
    c->v[c->n - 1] = *st;
    *st = warm;
}

void usched__stack_cache_drain(usched__stack_cache_t *c)
{
    usched__stack_free_many(c->v, c->n);
    c->n = 0;
}
