/*
 * A channel pipeline: generate -> square -> sum.
 *
 * Three fibers connected by two buffered channels. Each stage receives until
 * its input is closed and drained (usched_chan_recv returns -EPIPE), then
 * closes its own output, so the end of the stream flows down the pipeline.
 * Messages are void pointers; small integers travel in them directly.
 *
 *   cc pipeline.c $(pkg-config --cflags --libs usched) -o pipeline
 *   ./pipeline [COUNT]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <usched.h>

struct stage {
    usched_chan_t *in, *out;
    long count;    /* generate: how many numbers */
    uint64_t *sum; /* sum: where the total goes */
};

static void generate(void *arg)
{
    struct stage *st = arg;
    for (long i = 1; i <= st->count; i++)
        if (usched_chan_send(st->out, (void *)(intptr_t)i) < 0) break;
    usched_chan_close(st->out); /* end of stream */
}

static void square(void *arg)
{
    struct stage *st = arg;
    void *msg;
    while (usched_chan_recv(st->in, &msg) == 0) {
        intptr_t v = (intptr_t)msg;
        usched_chan_send(st->out, (void *)(v * v));
    }
    usched_chan_close(st->out);
}

static void sum(void *arg)
{
    struct stage *st = arg;
    void *msg;
    while (usched_chan_recv(st->in, &msg) == 0) *st->sum += (uint64_t)(intptr_t)msg;
}

int main(int argc, char **argv)
{
    long count = argc > 1 ? atol(argv[1]) : 100000;
    if (count < 1 || count > 1000000) {
        fprintf(stderr, "pipeline: COUNT '%s' must be 1..1000000\n", argv[1]);
        return 2;
    }
    usched_t *s;
    usched_chan_t *a, *b;
    int r = usched_create(&s);
    if (r == 0) r = usched_start(s);
    if (r == 0) r = usched_chan_create(&a, 64);
    if (r == 0) r = usched_chan_create(&b, 64);
    if (r < 0) {
        fprintf(stderr, "pipeline: %s: %s\n", usched_strerror(r), usched_last_error());
        return 1;
    }

    uint64_t total = 0;
    struct stage gen = {NULL, a, count, NULL}, sq = {a, b, 0, NULL}, acc = {b, NULL, 0, &total};
    usched_task_t *t[3];
    usched_spawn(s, &t[0], generate, &gen);
    usched_spawn(s, &t[1], square, &sq);
    usched_spawn(s, &t[2], sum, &acc);
    for (int i = 0; i < 3; i++) usched_join(t[i]);

    usched_chan_destroy(a);
    usched_chan_destroy(b);
    usched_destroy(s);

    uint64_t n = (uint64_t)count, want = n * (n + 1) * (2 * n + 1) / 6;
    printf("sum of squares of 1..%ld = %llu (%s)\n", count, (unsigned long long)total,
           total == want ? "correct" : "WRONG");
    return total == want ? 0 : 1;
}
