/*
 * A bounded buffer guarded by a mutex, with two condition variables:
 * producers wait while it is full, consumers while it is empty.
 *
 * Fibers that wait park (their CPU runs other fibers); the mutex hands
 * itself to the longest waiter under contention. Always re-check the
 * condition in a loop after usched_cond_wait returns.
 *
 *   cc mutex_cond.c $(pkg-config --cflags --libs usched) -o mutex_cond
 *   ./mutex_cond
 */
#include <stdint.h>
#include <stdio.h>

#include <usched.h>

#define SLOTS 8
#define PRODUCERS 4
#define CONSUMERS 4
#define ITEMS 5000 /* per producer */

static struct {
    usched_mutex_t lock;
    usched_cond_t not_full, not_empty;
    long items[SLOTS];
    int head, count;
    int producers_left; /* consumers stop when 0 and the buffer is empty */
} buf;

static void produce(void *arg)
{
    long base = (long)(intptr_t)arg * ITEMS;
    for (long i = 1; i <= ITEMS; i++) {
        usched_mutex_lock(&buf.lock);
        while (buf.count == SLOTS) usched_cond_wait(&buf.not_full, &buf.lock);
        buf.items[(buf.head + buf.count) % SLOTS] = base + i;
        buf.count++;
        usched_cond_signal(&buf.not_empty);
        usched_mutex_unlock(&buf.lock);
    }
    usched_mutex_lock(&buf.lock);
    if (--buf.producers_left == 0) usched_cond_broadcast(&buf.not_empty); /* wake them to stop */
    usched_mutex_unlock(&buf.lock);
}

static void consume(void *arg)
{
    long *sum = arg;
    for (;;) {
        usched_mutex_lock(&buf.lock);
        while (buf.count == 0 && buf.producers_left > 0)
            usched_cond_wait(&buf.not_empty, &buf.lock);
        if (buf.count == 0) { /* no producer left and nothing to take */
            usched_mutex_unlock(&buf.lock);
            return;
        }
        *sum += buf.items[buf.head];
        buf.head = (buf.head + 1) % SLOTS;
        buf.count--;
        usched_cond_signal(&buf.not_full);
        usched_mutex_unlock(&buf.lock);
    }
}

int main(void)
{
    usched_t *s;
    int r = usched_create(&s);
    if (r == 0) r = usched_start(s);
    if (r == 0) r = usched_mutex_init(&buf.lock);
    if (r == 0) r = usched_cond_init(&buf.not_full);
    if (r == 0) r = usched_cond_init(&buf.not_empty);
    if (r < 0) {
        fprintf(stderr, "mutex_cond: %s: %s\n", usched_strerror(r), usched_last_error());
        return 1;
    }
    buf.producers_left = PRODUCERS;

    long sums[CONSUMERS] = {0};
    usched_task_t *t[PRODUCERS + CONSUMERS];
    for (int i = 0; i < CONSUMERS; i++) usched_spawn(s, &t[i], consume, &sums[i]);
    for (int i = 0; i < PRODUCERS; i++)
        usched_spawn(s, &t[CONSUMERS + i], produce, (void *)(intptr_t)i);
    for (int i = 0; i < PRODUCERS + CONSUMERS; i++) usched_join(t[i]);

    long total = 0;
    for (int i = 0; i < CONSUMERS; i++) total += sums[i];
    long n = (long)PRODUCERS * ITEMS, want = n * (n + 1) / 2; /* every item 1..n once */
    printf("consumed items sum to %ld (%s)\n", total, total == want ? "correct" : "WRONG");

    usched_cond_destroy(&buf.not_empty);
    usched_cond_destroy(&buf.not_full);
    usched_mutex_destroy(&buf.lock);
    usched_destroy(s);
    return total == want ? 0 : 1;
}
