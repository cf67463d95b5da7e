/*
 * usched topo [--input SRC] [--cpus LIST] [--format tree|dfly|json|emulate] [--emulate]
 *
 * Prints a topology (tree format: and the CPU quota line, docs/quota.md).
 * Exit status: 0 printed; 1 the input or the CPU list
 * cannot be loaded (missing path, malformed synthetic string, CPUs out of
 * range); 2 bad usage (unknown option or format, missing value). Errors are
 * one line on stderr, and nothing is printed on stdout then.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "usched.h"

int cmd_topo(int argc, char **argv);

static const char topo_usage[] =
    "usage: usched topo [--input SRC] [--cpus LIST] [--format FMT] [--emulate]\n"
    "\n"
    "Prints the CPU topology as usched sees it.\n"
    "\n"
    "  -i, --input SRC     an hwloc synthetic string ('pack:2 l3:1 l2:6 core:1 pu:2'),\n"
    "                      an hwloc XML file, or a directory holding a captured\n"
    "                      Linux root (sys/, proc/); default: this machine\n"
    "  -c, --cpus LIST     restrict to these CPUs ('0-7,16', usched CPU numbers)\n"
    "  -f, --format FMT    tree (default; indented, with caches and CPU lists,\n"
    "                      then the cgroup CPU quota and the CPUs it pays for),\n"
    "                      dfly (DragonFly BSD's hw.cpu_topology.tree), json or\n"
    "                      emulate (as --emulate)\n"
    "  -e, --emulate       print the real CPU each virtual CPU of --input runs on\n"
    "                      under SMT emulation (the emulate setting)\n"
    "  -h, --help          print this help\n";

static const char *const topo_formats[] = {"tree", "dfly", "json", "emulate"};

int cmd_topo(int argc, char **argv)
{
    static const struct option opts[] = {
        {"input", required_argument, NULL, 'i'},
        {"cpus", required_argument, NULL, 'c'},
        {"format", required_argument, NULL, 'f'},
        {"emulate", no_argument, NULL, 'e'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *input = NULL, *cpus = NULL, *format = "tree";
    int o;
    opterr = 0;
    optind = 1;
    while ((o = getopt_long(argc, argv, ":i:c:f:eh", opts, NULL)) != -1) {
        switch (o) {
        case 'i': input = optarg; break;
        case 'c': cpus = optarg; break;
        case 'f': format = optarg; break;
        case 'e': format = "emulate"; break;
        case 'h': fputs(topo_usage, stdout); return 0;
        case ':':
            fprintf(stderr, "usched topo: option '%s' needs a value (see usched topo --help)\n",
                    argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "usched topo: unknown option '%s' (see usched topo --help)\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "usched topo: unexpected argument '%s' (see usched topo --help)\n",
                argv[optind]);
        return 2;
    }
    size_t i = 0, n = sizeof topo_formats / sizeof topo_formats[0];
    while (i < n && strcmp(format, topo_formats[i])) i++;
    if (i == n) {
        fprintf(stderr, "usched topo: format '%s': unknown (tree, dfly, json or emulate)\n", format);
        return 2;
    }
    int r = usched_topo_print(stdout, input, cpus, format);
    if (r == 0 && i == 0) r = usched_quota_print(stdout, input, cpus); /* tree: + CPU quota */
    if (r < 0) {
        fprintf(stderr, "usched topo: %s\n", usched_last_error());
        return 1;
    }
    return fflush(stdout) == 0 ? 0 : 1;
}
