/*
 * Fork-join: a parallel sum of 1..N by divide and conquer.
 *
 * Each fiber splits its range in two, spawns a child for one half, sums the
 * other half itself and joins the child. usched places a spawned child in
 * the spawner's "next slot"; idle CPUs steal the older children, so the work
 * spreads over every CPU while the joins stay cheap (joining a child that
 * has not started yet runs it inline, without a context switch).
 *
 *   cc fork_join.c $(pkg-config --cflags --libs usched) -o fork_join
 *   ./fork_join [N]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <usched.h>

#define CUTOFF 1000 /* below this many numbers, add them up in a loop */

struct range {
    usched_t *s;
    uint64_t lo, hi; /* [lo, hi) */
    uint64_t sum;    /* the result */
};

static void sum_range(void *arg)
{
    struct range *r = arg;
    if (r->hi - r->lo <= CUTOFF) {
        r->sum = 0;
        for (uint64_t i = r->lo; i < r->hi; i++) r->sum += i;
        return;
    }
    uint64_t mid = r->lo + (r->hi - r->lo) / 2;
    struct range left = {r->s, r->lo, mid, 0}, right = {r->s, mid, r->hi, 0};
    usched_task_t *child;
    /* Fork the left half; on failure (out of memory) do it here instead. */
    if (usched_spawn(r->s, &child, sum_range, &left) < 0) {
        sum_range(&left);
        child = NULL;
    }
    sum_range(&right);
    if (child) usched_join(child); /* join */
    r->sum = left.sum + right.sum;
}

int main(int argc, char **argv)
{
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000;
    usched_t *s;
    int r = usched_create(&s); /* defaults from USCHED_POLICY, USCHED_TOPOLOGY, ... */
    if (r == 0) r = usched_start(s);
    if (r < 0) {
        fprintf(stderr, "fork_join: %s: %s\n", usched_strerror(r), usched_last_error());
        return 1;
    }

    /* The root fiber is spawned from this (outside) thread, which joins it. */
    struct range all = {s, 1, n + 1, 0};
    usched_task_t *root;
    if ((r = usched_spawn(s, &root, sum_range, &all)) < 0 || (r = usched_join(root)) < 0) {
        fprintf(stderr, "fork_join: %s\n", usched_strerror(r));
        return 1;
    }
    usched_destroy(s);

    uint64_t want = n * (n + 1) / 2;
    printf("sum of 1..%llu = %llu (%s)\n", (unsigned long long)n, (unsigned long long)all.sum,
           all.sum == want ? "correct" : "WRONG");
    return all.sum == want ? 0 : 1;
}
