/*
 * One million fiber stacks alive at once (scaled by USCHED_STRESS_SCALE),
 * each holding an initial context frame as an idle fiber's does. Prints the
 * resident memory per stack and the mappings used; checks the process stays
 * within vm.max_map_count, that a second round reuses every stack, and that
 * freeing the burst returns its memory (no page of a released stack stays
 * resident, by mincore).
 *
 *   stack_million [auto|mprotect]   (mprotect: as on a kernel without
 *                                    MADV_GUARD_INSTALL, e.g. Debian 12's 6.1)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arch/arch.h"
#include "core/stack.h"
#include "test.h"

enum { SZ = 64 << 10 };

static long status_kb(const char *key)
{
    char line[256];
    long v = -1;
    size_t klen = strlen(key);
    FILE *f = fopen("/proc/self/status", "r");
    ASSERT(f);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, klen) == 0 && line[klen] == ':')
            v = strtol(line + klen + 1, NULL, 10);
    fclose(f);
    ASSERT_GE(v, 0);
    return v;
}

static long count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    ASSERT(f);
    long n = 0;
    int c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

static long read_long(const char *path)
{
    FILE *f = fopen(path, "r");
    long v = 65530;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = 65530;
        fclose(f);
    }
    return v;
}

static void never(void *arg)
{
    (void)arg;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "auto";
    if (strcmp(mode, "mprotect") == 0)
        usched__stack_set_guard_mode(USCHED__STACK_GUARD_MPROTECT);
    else if (strcmp(mode, "auto") != 0)
        TEST_FAIL_("mode '%s': expected auto or mprotect", mode);

    long n = test_scale(1000000);
    usched__stack_t *st = calloc((size_t)n, sizeof *st);
    ASSERT(st);
    memset(st, 0, (size_t)n * sizeof *st); /* descriptors resident before measuring */
    long rss0 = status_kb("VmRSS");

    double t0 = test_now();
    for (long i = 0; i < n; i++) {
        ASSERT_OK(usched__stack_alloc(SZ, &st[i]));
        usched__ctx_t ctx; /* writes the initial frame into the top page */
        usched__ctx_make(&ctx, st[i].lo, st[i].size, never, NULL, usched__ctx_fpmode());
    }
    double t_alloc = test_now() - t0;
    long rss1 = status_kb("VmRSS"), pte = status_kb("VmPTE"), maps = count_lines("/proc/self/maps");
    long max_maps = read_long("/proc/sys/vm/max_map_count");
    struct usched__stack_stats s;
    usched__stack_get_stats(&s);
    printf("mode %s: %ld stacks of %d KiB alive in %.2f s\n", mode, n, SZ >> 10, t_alloc);
    printf("  resident: %.2f KiB per stack (VmRSS +%ld KiB), page tables %ld KiB (%.2f KiB per stack)\n",
           (double)(rss1 - rss0) / (double)n, rss1 - rss0, pte, (double)pte / (double)n);
    printf("  guarded %ld, canaried %ld, chunks %ld, mappings counted %ld, "
           "/proc/self/maps %ld lines (max_map_count %ld, budget %ld)\n",
           s.guarded, s.unguarded, s.chunks, s.mappings, maps, max_maps, s.budget);
    ASSERT_LT(maps, max_maps / 2 + 1000);
    ASSERT_GE(s.guarded + s.unguarded, n);
    if (strcmp(mode, "mprotect") == 0)
        ASSERT_LE(s.mappings, s.budget + 2048);

    void **lo = malloc((size_t)n * sizeof *lo);
    ASSERT(lo);
    for (long i = 0; i < n; i++)
        lo[i] = st[i].lo;
    long released0 = s.released;
    t0 = test_now();
    for (long i = 0; i < n; i++)
        usched__stack_free(&st[i]);
    usched__stack_trim(-1, -1);
    double t_free = test_now() - t0;
    long rss2 = status_kb("VmRSS");
    usched__stack_get_stats(&s);
    long released = s.released - released0;
    /* Which stacks still hold a resident page: mincore(2) on each, so that
     * the check sees the stacks alone, not the process's RSS (a sanitizer's
     * shadow and the kernel's huge-page collapsing move that). */
    long page = sysconf(_SC_PAGESIZE), resident = 0;
    unsigned char vec[SZ / 4096 + 1];
    for (long i = 0; i < n; i++) {
        ASSERT_OK(mincore(lo[i], SZ, vec));
        int any = 0;
        for (long j = 0; j < SZ / page; j++)
            any |= vec[j] & 1;
        resident += any;
    }
    free(lo);
    printf("  freed in %.2f s: %ld released to the kernel, %ld of %ld stacks still resident, "
           "VmRSS +%ld KiB over the start\n",
           t_free, released, resident, n, rss2 - rss0);
    ASSERT_GE(s.free, n);
    /* All but the resident cache (at most 4,096 stacks) came back, and no
     * page of what came back stays (the free list may also hold stacks
     * carved but never used, released with the rest). */
    ASSERT_GE(released, n - 4096);
    ASSERT_LE(resident, s.free - released);

    long c = s.chunks;
    t0 = test_now();
    for (long i = 0; i < n; i++)
        ASSERT_OK(usched__stack_alloc(SZ, &st[i]));
    double t_again = test_now() - t0;
    usched__stack_get_stats(&s);
    ASSERT_EQ(s.chunks, c);
    for (long i = 0; i < n; i++)
        usched__stack_free(&st[i]);
    printf("  second round: %ld stacks reused in %.2f s, no new chunk\n", n, t_again);
    printf("  VmHWM %ld KiB\n", status_kb("VmHWM"));
    free(st);
    return 0;
}
