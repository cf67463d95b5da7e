/*
 * A directory of fake schedstat lines for the stall monitor's contention
 * reads (struct usched's cfg.schedstat_dir, monitor.c C1): one file per
 * CPU, named by the CPU, holding "run_ns delay_ns slices", each replaced
 * whole (a rename) so the monitor never reads half a line. Used by
 * core_contend and core_pack, so their verdicts do not depend on the
 * machine's load.
 */
#ifndef USCHED_TESTS_FAKE_SCHEDSTAT_H
#define USCHED_TESTS_FAKE_SCHEDSTAT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "test.h"

#define FAKE_SS_MAX 256

struct fake_ss {
    char dir[64];
    uint64_t run_ns[FAKE_SS_MAX], delay_ns[FAKE_SS_MAX];
};

/* Creates the directory (/tmp/usched-NAME-XXXXXX). */
static inline void fake_ss_init(struct fake_ss *f, const char *name)
{
    snprintf(f->dir, sizeof f->dir, "/tmp/usched-%s-XXXXXX", name);
    ASSERT(mkdtemp(f->dir));
    for (int c = 0; c < FAKE_SS_MAX; c++) f->run_ns[c] = f->delay_ns[c] = 0;
}

/* CPU cpu's file now holds line. */
static inline void fake_ss_line(const struct fake_ss *f, int cpu, const char *line)
{
    char path[128], tmp[128];
    snprintf(path, sizeof path, "%s/%d", f->dir, cpu);
    snprintf(tmp, sizeof tmp, "%s/.%d", f->dir, cpu);
    FILE *fp = fopen(tmp, "w");
    ASSERT(fp);
    fputs(line, fp);
    ASSERT_EQ(fclose(fp), 0);
    ASSERT_EQ(rename(tmp, path), 0);
}

/* One step of fake time: 1 ms runnable per CPU, CPU c waiting pct[c] % of
 * it, for CPUs 0 .. upto-1 (the others' files are left as they are); then
 * half a millisecond for the monitor to look. */
static inline void fake_ss_feed(struct fake_ss *f, int upto, const int *pct)
{
    for (int c = 0; c < upto; c++) {
        f->run_ns[c] += 1000000ull * (uint64_t)(100 - pct[c]) / 100;
        f->delay_ns[c] += 1000000ull * (uint64_t)pct[c] / 100;
        char line[96];
        snprintf(line, sizeof line, "%llu %llu 7\n", (unsigned long long)f->run_ns[c],
                 (unsigned long long)f->delay_ns[c]);
        fake_ss_line(f, c, line);
    }
    usleep(500);
}

/* Removes the files of CPUs 0 .. ncpus-1 and the directory. */
static inline void fake_ss_remove(const struct fake_ss *f, int ncpus)
{
    char path[128];
    for (int c = 0; c < ncpus; c++) {
        snprintf(path, sizeof path, "%s/%d", f->dir, c);
        unlink(path);
    }
    ASSERT_EQ(rmdir(f->dir), 0);
}

#endif
