/* usched bench --noise: busy neighbour processes (bench_noise.h). */
#include "bench_noise.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t noise_pid[BENCH_NOISE_MAX];
static int noise_n;

static _Noreturn void noise_child(pid_t parent)
{
    /* Dies with the benchmark, even if it is killed before it can stop us
     * (the check closes the race with a parent that died before prctl). */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent) _exit(0);
    for (volatile unsigned long x = 0;; x++) {
    }
}

double bench_noise_cpu_s(void)
{
    double sum = 0;
    for (int i = 0; i < noise_n; i++) {
        /* the first field of schedstat: nanoseconds on a CPU (the stat
         * file's utime and stime count clock ticks, 10 ms here) */
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/schedstat", (int)noise_pid[i]);
        FILE *f = fopen(path, "r");
        if (!f) return NAN;
        unsigned long long ns;
        int ok = fscanf(f, "%llu", &ns) == 1;
        fclose(f);
        if (!ok) return NAN;
        sum += (double)ns / 1e9;
    }
    return sum;
}

void bench_noise_stop(void)
{
    for (int i = 0; i < noise_n; i++) kill(noise_pid[i], SIGKILL);
    for (int i = 0; i < noise_n; i++)
        while (waitpid(noise_pid[i], NULL, 0) < 0 && errno == EINTR) {
        }
    noise_n = 0;
}

int bench_noise_start(int n, char *err, size_t len)
{
    if (n < 0 || n > BENCH_NOISE_MAX) {
        snprintf(err, len, "--noise '%d': must be 0 to %d", n, BENCH_NOISE_MAX);
        return -1;
    }
    pid_t self = getpid();
    fflush(NULL); /* the children never return to stdio, but flush anyway */
    for (int i = 0; i < n; i++) {
        pid_t p = fork();
        if (p == 0) noise_child(self);
        if (p < 0) {
            snprintf(err, len, "--noise: cannot start busy process %d of %d: %s", i + 1, n, strerror(errno));
            bench_noise_stop();
            return -1;
        }
        noise_pid[noise_n++] = p;
    }
    return 0;
}
