/* usched__cpulist_parse: ranges, singles, blanks, and every way a list can
 * be wrong (each with a message naming the list and the problem). */
#include "topo_test.h"

#define W 2 /* 128 CPUs */

static void ok(const char *s, int limit, const char *want_cpus)
{
    uint64_t mask[W], want[W];
    char err[256] = "";
    int r = usched__cpulist_parse(s, limit, mask, W, err, sizeof err);
    if (r != 0) TEST_FAIL_("'%s' rejected: %s", s, err);
    ASSERT_OK(usched__cpulist_parse(want_cpus, 128, want, W, err, sizeof err));
    for (int w = 0; w < W; w++) ASSERT_EQ_U(mask[w], want[w]);
}

static void bad(const char *s, int limit, const char *needle)
{
    uint64_t mask[W];
    char err[256] = "";
    ASSERT_EQ(usched__cpulist_parse(s, limit, mask, W, err, sizeof err), -EINVAL);
    ASSERT_STR_CONTAINS(err, needle);
    ASSERT_STR_CONTAINS(err, "cpus '");
    ASSERT(!strchr(err, '\n'));
}

int main(void)
{
    uint64_t mask[W];
    char err[256];
    ASSERT_OK(usched__cpulist_parse("0-7,16", 24, mask, W, err, sizeof err));
    ASSERT_EQ_U(mask[0], 0x100ffu);
    ASSERT_EQ_U(mask[1], 0);
    ASSERT_OK(usched__cpulist_parse("64,127", 128, mask, W, err, sizeof err));
    ASSERT_EQ_U(mask[0], 0);
    ASSERT_EQ_U(mask[1], (1ull << 63) | 1);

    ok("5", 8, "5");
    ok("0-0", 8, "0");
    ok("3-5,1", 8, "1,3,4,5");
    ok("1,1,1-2", 8, "1-2");           /* repeats are harmless */
    ok(" 0 - 2 , 4 ", 8, "0,1,2,4");   /* blanks around everything */
    ok("0-3\n", 8, "0-3");             /* a trailing newline (from a file) */
    ok("\t7", 8, "7");
    ok("0-127", 128, "0-127");

    bad("", 8, "empty");
    bad("   ", 8, "empty");
    bad(NULL, 8, "empty");
    bad("8", 8, "CPU 8 is out of range (8 CPUs: 0-7)");
    bad("0-8", 8, "out of range");
    bad("7-3", 8, "reversed range 7-3");
    bad("a", 8, "expected a CPU number at position 1");
    bad("1,", 8, "expected a CPU number at the end");
    bad(",1", 8, "position 1");
    bad("1,,2", 8, "position 3");
    bad("1-", 8, "at the end");
    bad("-1", 8, "position 1");
    bad("1-2-3", 8, "unexpected '-'");
    bad("1 2", 8, "unexpected '2'");
    bad("1;2", 8, "unexpected ';'");
    bad("0x3", 8, "unexpected 'x'");
    bad("99999999999999999999", 8, "too large");
    bad("3", 0, "out of range");
    /* A mask too small for the limit is the caller's bug, still an error. */
    ASSERT_EQ(usched__cpulist_parse("0", 129, mask, W, err, sizeof err), -EINVAL);
    return 0;
}
