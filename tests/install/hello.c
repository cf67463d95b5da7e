/* Built against an installed usched: checks the error functions and the
 * version, then creates a scheduler on a synthetic topology (so a static
 * link must bring in hwloc), starts it, runs fibers that add up 1..N and
 * checks the sum. Prints "usched <version> ok" and exits 0 on success. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <usched.h>

#define NFIBERS 64

static atomic_long sum;

static void add(void *arg)
{
    atomic_fetch_add(&sum, (long)(intptr_t)arg);
}

static int fail(const char *what, int r)
{
    fprintf(stderr, "%s: %s (%s)\n", what, usched_strerror(r), usched_last_error());
    return 1;
}

int main(void)
{
    const char *e = usched_strerror(-EINVAL);
    if (!e || strcmp(e, "invalid argument") != 0) {
        fprintf(stderr, "usched_strerror(-EINVAL): got \"%s\", expected \"invalid argument\"\n",
                e ? e : "(null)");
        return 1;
    }
    const char *last = usched_last_error();
    if (!last || last[0] != '\0') {
        fprintf(stderr, "usched_last_error() before any failure: got \"%s\", expected \"\"\n",
                last ? last : "(null)");
        return 1;
    }
    if (strcmp(usched_version(), USCHED_VERSION_STRING) != 0) {
        fprintf(stderr, "usched_version(): library %s, header %s\n", usched_version(),
                USCHED_VERSION_STRING);
        return 1;
    }

    usched_t *s;
    usched_task_t *t[NFIBERS];
    int r = usched_create(&s);
    if (r < 0) return fail("usched_create", r);
    if ((r = usched_set(s, "topology", "pack:1 l3:1 l2:2 core:1 pu:2")) < 0)
        return fail("usched_set topology", r);
    if ((r = usched_start(s)) < 0) return fail("usched_start", r);
    if (usched_ncpus(s) != 4) {
        fprintf(stderr, "usched_ncpus: got %d, expected 4 (pack:1 l3:1 l2:2 core:1 pu:2)\n",
                usched_ncpus(s));
        return 1;
    }
    for (int i = 0; i < NFIBERS; i++)
        if ((r = usched_spawn(s, &t[i], add, (void *)(intptr_t)(i + 1))) < 0)
            return fail("usched_spawn", r);
    for (int i = 0; i < NFIBERS; i++)
        if ((r = usched_join(t[i])) < 0) return fail("usched_join", r);
    if ((r = usched_destroy(s)) < 0) return fail("usched_destroy", r);
    long want = (long)NFIBERS * (NFIBERS + 1) / 2;
    if (atomic_load(&sum) != want) {
        fprintf(stderr, "sum of the fibers' values: got %ld, expected %ld\n", atomic_load(&sum),
                want);
        return 1;
    }
    printf("usched %s ok (hwloc %s)\n", usched_version(), usched_hwloc_version());
    return 0;
}
