/*
 * usched bench [WORKLOAD] [options]: the front of the benchmark harness
 * (tools/bench/bench.h). Parses the command line into the harness's
 * configuration, prints the help or a usage error, and runs the harness,
 * which prints the report; `usched bench --help` lists the options, the
 * man page usched(1) describes them.
 *
 * Exit status: 0 done; 1 a run failed (a usched call failed or a workload's
 * check found a wrong result; a failing peer is reported, not fatal); 2 bad
 * usage (one line on stderr).
 */
#include <stdio.h>

#include "bench.h"
#include "cli_opts.h"

int cmd_bench(int argc, char **argv);

/* Set by the fuzz targets (tests/fuzz/fuzz_cli.c): parse and check the
 * command line, build the variants, then return 0 without running them. */
int bench_parse_only;

int cmd_bench(int argc, char **argv)
{
    struct bench_config c;
    struct bench_error e = {"", "bench"};
    int rc = bench_config_parse(&c, argc, argv, &e);
    if (!rc && c.help) {
        bench_help(&c, stdout);
    } else if (!rc) {
        c.parse_only = bench_parse_only != 0;
        rc = bench_run(&c, &e);
    }
    if (rc == 2 && e.msg[0]) cli_usage_error("bench", e.help, "%s", e.msg);
    bench_config_free(&c);
    return rc;
}
