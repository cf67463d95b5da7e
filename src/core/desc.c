/*
 * Fiber descriptors, apart from their stacks.
 *
 * A descriptor used to sit at the top of its fiber's stack. Spawning a
 * batch then wrote one fresh page per child (a TLB entry and five cache
 * lines each, with the initial frame beside them), and a child stolen by
 * another CPU pulled its spawner's stack lines over before it could run.
 * Now descriptors are packed in chunks of DESC_CHUNK, and a stack is only
 * reserved at spawn: the context is made where the fiber first runs, on
 * that CPU's warmest free stack (sched.c, first_run). A child joined
 * inline never touches a stack at all.
 *
 * The pool is process-wide, as the stack pool is: one LIFO array under a
 * mutex, whose length is kept at least the number of descriptors ever made
 * (grown before each new chunk), so that returning one never allocates. Chunks are never freed: a descriptor may be
 * read after its fiber is gone (a second, wrong join reads its magic), so
 * its memory must stay mapped, and schedulers created later reuse it.
 * Workers keep a cache in front (desc.h); a descriptor freed on another CPU
 * than the one that made it goes to that CPU's cache.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "base/fault.h"
#include "core/core.h"

/* How many spawns ahead desc_get asks for a descriptor's lines. */
#define DESC_PREFETCH 2

#define DESC_CHUNK 64 /* descriptors per allocation (20 KiB): not tuned */

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct usched_task **pool_v; /* free descriptors, LIFO */
static size_t pool_n, pool_made;    /* pool_made: every descriptor ever made */
static size_t pool_room;            /* pool_v's length, >= pool_made */

/* Under pool_lock: a new chunk onto the pool; 0 or -ENOMEM. The array
 * doubles, so a million descriptors cost a few dozen reallocations, not
 * one per chunk. */
static int pool_grow(void)
{
    if (pool_made + DESC_CHUNK > pool_room) {
        size_t room = pool_room ? 2 * pool_room : 16 * DESC_CHUNK;
        struct usched_task **v = usched__realloc(pool_v, room * sizeof *v);
        if (!v) return -ENOMEM;
        pool_v = v;
        pool_room = room;
    }
    struct usched_task *chunk = usched__alloc_lines(DESC_CHUNK * sizeof *chunk);
    if (!chunk) return -ENOMEM;
    memset(chunk, 0, DESC_CHUNK * sizeof *chunk);
    pool_made += DESC_CHUNK;
    for (size_t i = DESC_CHUNK; i-- > 0;) pool_v[pool_n++] = &chunk[i];
    return 0;
}

/* Takes up to n descriptors into out; how many (>= 1) or -ENOMEM. */
static int pool_take(struct usched_task **out, int n)
{
    pthread_mutex_lock(&pool_lock);
    int rc = pool_n ? 0 : pool_grow();
    int k = 0;
    while (rc == 0 && k < n && pool_n) out[k++] = pool_v[--pool_n];
    pthread_mutex_unlock(&pool_lock);
    return rc < 0 ? rc : k;
}

static void pool_give(struct usched_task *const *v, int n)
{
    pthread_mutex_lock(&pool_lock);
    for (int i = 0; i < n; i++) pool_v[pool_n++] = v[i];
    pthread_mutex_unlock(&pool_lock);
}

int usched__desc_get(usched__desc_cache_t *c, struct usched_task **out)
{
    if (!c) {
        int k = pool_take(out, 1);
        return k < 0 ? k : 0;
    }
    if (!c->n) {
        int k = pool_take(c->v, USCHED_DESC_CACHE / 4);
        if (k < 0) return k;
        c->n = k;
    }
    *out = c->v[--c->n];
    /* The spawn after the next one writes its first three lines (core.h):
     * ask for them now. A batch of spawns reuses descriptors its joins just
     * freed, whose children other CPUs ran - and wrote - so otherwise each
     * spawn waited for those lines to come back. */
    if (c->n >= DESC_PREFETCH) usched__desc_prefetch(c->v[c->n - DESC_PREFETCH]);
    return 0;
}

void usched__desc_put(usched__desc_cache_t *c, struct usched_task *t)
{
    if (!c) {
        pool_give(&t, 1);
        return;
    }
    if (c->n == USCHED_DESC_CACHE) {
        c->n -= USCHED_DESC_CACHE / 2;
        pool_give(&c->v[c->n], USCHED_DESC_CACHE / 2);
    }
    c->v[c->n++] = t;
}

void usched__desc_cache_drain(usched__desc_cache_t *c)
{
    pool_give(c->v, c->n);
    c->n = 0;
}
