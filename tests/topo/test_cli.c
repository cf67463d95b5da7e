/*
 * `usched topo` and the dispatcher, run as a program (argv[1] is the built
 * binary): output on success, and for every error one line on stderr naming
 * the input and the problem, nothing on stdout, exit 2 (usage) or 1 (cannot
 * load).
 */
#include <sched.h>
#include <hwloc.h>
#include <stdarg.h>

#include "run.h"
#include "topo_test.h"
#include "usched.h"

static const char *cli;

/* Runs the CLI with up to 8 arguments (NULL-terminated). */
static struct test_run run(const char *a0, ...)
{
    const char *argv[10] = {cli};
    va_list ap;
    va_start(ap, a0);
    int n = 1;
    for (const char *a = a0; a && n < 9; a = va_arg(ap, const char *)) argv[n++] = a;
    va_end(ap);
    return test_run_argv(argv, NULL);
}

#define done test_run_free

/* An error: the exit status, nothing on stdout, one line on stderr holding
 * the needle. */
#define FAILS(code, needle, ...)                                               \
    do {                                                                        \
        struct test_run r_ = run(__VA_ARGS__, NULL);                                 \
        if (r_.status != (code))                                                \
            TEST_FAIL_("exit %d, expected %d; stderr: %s", r_.status, code, r_.err); \
        ASSERT_STR_EQ(r_.out, "");                                              \
        ASSERT(strchr(r_.err, '\n') == r_.err + strlen(r_.err) - 1);            \
        ASSERT_STR_CONTAINS(r_.err, needle);                                    \
        done(r_);                                                               \
    } while (0)

static struct test_run succeeds(struct test_run r)
{
    if (r.status != 0) TEST_FAIL_("exit %d; stderr: %s", r.status, r.err);
    ASSERT_STR_EQ(r.err, "");
    return r;
}

int main(int argc, char **argv)
{
    ASSERT_EQ(argc, 2);
    cli = argv[1];

    /* Dispatcher. */
    struct test_run r = succeeds(run("--help", NULL));
    ASSERT_STR_CONTAINS(r.out, "usage: usched <command>");
    ASSERT_STR_CONTAINS(r.out, "topo");
    done(r);
    r = succeeds(run("--version", NULL));
    /* The header's version, the library's and the hwloc it was built with. */
    ASSERT_STR_EQ(r.out, "usched " USCHED_VERSION_STRING " (library " USCHED_VERSION_STRING
                         ", hwloc " HWLOC_VERSION ")\n");
    done(r);
    r = run(NULL);
    ASSERT_EQ(r.status, 2);
    ASSERT_STR_CONTAINS(r.err, "no command");
    done(r);
    FAILS(2, "usched: unknown command 'frobnicate'", "frobnicate");
    FAILS(2, "usched: unknown option '--frob'", "--frob");

    /* Success paths. */
    r = succeeds(run("topo", "--help", NULL));
    ASSERT_STR_CONTAINS(r.out, "usage: usched topo");
    done(r);
    r = succeeds(run("topo", NULL)); /* this machine, tree */
    ASSERT_STR_CONTAINS(r.out, "Machine");
    ASSERT_STR_CONTAINS(r.out, "\nquota: "); /* the CPU quota line (docs/quota.md) */
    done(r);
    r = succeeds(run("topo", "--input", "pack:1 core:2 pu:2", "--format", "dfly", NULL));
    ASSERT_STR_EQ(r.out, "\\-PACKAGE MEMBERS: cpu0 cpu1 cpu2 cpu3 \n"
                         "  \\-CHIP ID 0: cpu0 cpu1 cpu2 cpu3 \n"
                         "    |-CORE ID 0: cpu0 cpu1 \n"
                         "    | |-THREAD ID 0: cpu0 \n"
                         "    | \\-THREAD ID 1: cpu1 \n"
                         "    \\-CORE ID 1: cpu2 cpu3 \n"
                         "      |-THREAD ID 0: cpu2 \n"
                         "      \\-THREAD ID 1: cpu3 \n");
    done(r);
    r = succeeds(run("topo", "-i", "pack:2 l3:1 l2:6 core:1 pu:2", "-c", "0-3,12", "-f", "json", NULL));
    ASSERT_STR_CONTAINS(r.out, "\"pus\": 5,");
    ASSERT_STR_CONTAINS(r.out, "{\"cpu\": 4, \"os_index\": 12,");
    done(r);
    /* SMT emulation: each core on one real CPU of this process, round-robin */
    {
        int real[CPU_SETSIZE], nreal = 0;
        cpu_set_t set;
        ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
        for (int i = 0; i < CPU_SETSIZE; i++)
            if (CPU_ISSET(i, &set)) real[nreal++] = i;
        r = succeeds(run("topo", "--input", "pack:1 core:2 pu:2", "--emulate", NULL));
        char line[64];
        for (int c = 0; c < 4; c++) {
            snprintf(line, sizeof line, "\n%-6d %-6d %d\n", c, c / 2, real[(c / 2) % nreal]);
            ASSERT_STR_CONTAINS(r.out, line);
        }
        ASSERT_EQ(strstr(r.out, "share one real CPU") != NULL, nreal < 2);
        done(r);
        r = succeeds(run("topo", "-i", "pack:2 core:3 pu:2", "--format", "emulate", NULL));
        snprintf(line, sizeof line, "\n%-6d %-6d %d\n", 11, 5, real[5 % nreal]);
        ASSERT_STR_CONTAINS(r.out, line);
        ASSERT_EQ(strstr(r.out, "share one real CPU") != NULL, nreal < 6);
        done(r);
        FAILS(1, "emulate: needs a virtual topology", "topo", "--emulate");
    }
    r = succeeds(run("topo", "--input=pack:2 core:1 pu:1", "--format=tree", NULL));
    ASSERT_STR_CONTAINS(r.out, "cpus 2, packages 2,");
    done(r);
    const char *westmere = topo_machine_input(topo_machine_named("westmere"));
    r = succeeds(run("topo", "--format", "dfly", "--input", westmere, NULL));
    char *want = topo_golden("westmere.dfly");
    ASSERT_STR_EQ(r.out, want);
    free(want);
    done(r);
    r = succeeds(run("topo", "--format", "json", "--input",
                     USCHED_TOPOLOGIES_DIR "/xml/AMD-17h-Zen-2xEpyc-7451.xml", NULL));
    want = topo_golden("zen1.json");
    ASSERT_STR_EQ(r.out, want);
    free(want);
    done(r);

    /* Usage errors: exit 2. */
    FAILS(2, "unknown option '--bogus'", "topo", "--bogus");
    FAILS(2, "unknown option '-x'", "topo", "-x");
    FAILS(2, "format 'xml': unknown (tree, dfly, json or emulate)", "topo", "--format", "xml");
    FAILS(2, "option '--format' needs a value", "topo", "--format");
    FAILS(2, "option '--input' needs a value", "topo", "--input");
    FAILS(2, "unexpected argument 'extra'", "topo", "extra");

    /* Cannot load: exit 1, the message names the input. */
    FAILS(1, "input '/nonexistent/root': no such file or directory", "topo", "--input",
          "/nonexistent/root");
    FAILS(1, "input 'nosuch.xml': no such file or directory", "topo", "--input", "nosuch.xml");
    FAILS(1, "input 'pack:2 bogus:3': malformed hwloc synthetic description", "topo", "--input",
          "pack:2 bogus:3");
    FAILS(1, "input '/tmp': directory is not a captured Linux root", "topo", "--input", "/tmp");
    char empty[] = "/tmp/usched-topo-emptyroot-XXXXXX", cpudir[256];
    ASSERT(mkdtemp(empty));
    snprintf(cpudir, sizeof cpudir, "mkdir -p %s/sys/devices/system/cpu", empty);
    ASSERT_EQ(system(cpudir), 0);
    /* hwloc's own complaint about a root without CPUs stays off stderr. */
    FAILS(1, "hwloc cannot read this captured Linux root", "topo", "--input", empty);
    snprintf(cpudir, sizeof cpudir, "rm -rf %s", empty);
    ASSERT_EQ(system(cpudir), 0);
    /* An XML file libxml2 refuses: the file, the line, libxml2's reason. */
    char bad[] = "/tmp/usched-topo-badxml-XXXXXX", needle[256];
    int fd = mkstemp(bad);
    ASSERT_GE(fd, 0);
    static const char xml[] = "<topology version=\"2.0\">\n<object type=\"Machine\">\n</topology>\n";
    ASSERT_EQ(write(fd, xml, sizeof xml - 1), (ssize_t)(sizeof xml - 1));
    close(fd);
    snprintf(needle, sizeof needle, "input '%s': line 3: not well-formed XML: Opening and ending tag mismatch",
             bad);
    FAILS(1, needle, "topo", "--input", bad);
    unlink(bad);
    FAILS(1, "cpus '': empty CPU list", "topo", "--input", "pack:2 core:2 pu:1", "--cpus", "");
    FAILS(1, "cpus '9': CPU 9 is out of range (4 CPUs: 0-3)", "topo", "--input",
          "pack:2 core:2 pu:1", "--cpus", "9");
    FAILS(1, "cpus '3-1': reversed range 3-1", "topo", "-i", "pack:2 core:2 pu:1", "-c", "3-1");
    FAILS(1, "cpus '0,,1'", "topo", "-i", "pack:2 core:2 pu:1", "-c", "0,,1");
    FAILS(1, "cpus '0-99999'", "topo", "--cpus", "0-99999");
    return 0;
}
