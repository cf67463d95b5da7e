/*
 * `usched policies` and `usched knobs`, run as a program (argv[1] is the
 * built CLI): every policy and knob the library lists appears with its
 * description and fields, `knobs --check` prints the values a setting gives,
 * and bad arguments exit 2 (a bad setting 1) with one line on stderr.
 */
#include "run.h"
#include "test.h"
#include "usched.h"

static const char *cli;

static struct test_run run(const char *a1, const char *a2, const char *a3)
{
    const char *argv[] = {cli, a1, a2, a3, NULL};
    return test_run_argv(argv, NULL);
}

/* Line i (from 0) of s, copied to buf; NULL past the end. */
static const char *line_of(const char *s, int i, char *buf, size_t len)
{
    for (; i > 0 && s; i--) {
        s = strchr(s, '\n');
        if (s) s++;
    }
    if (!s || !*s) return NULL;
    size_t n = strcspn(s, "\n");
    if (n >= len) n = len - 1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return buf;
}

static int nlines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* The fields of a line split on runs of spaces (at most max). */
static int fields(char *line, char **f, int max)
{
    int n = 0;
    for (char *save = NULL, *t = strtok_r(line, " ", &save); t && n < max; t = strtok_r(NULL, " ", &save))
        f[n++] = t;
    return n;
}

static void expect_usage_error(struct test_run r, int status, const char *needle)
{
    if (r.status != status) TEST_FAIL_("exit %d, expected %d\n%s%s", r.status, status, r.out, r.err);
    ASSERT_STR_EQ(r.out, "");
    ASSERT_EQ(nlines(r.err), 1);
    ASSERT_STR_CONTAINS(r.err, needle);
}

/* `usched <cmd>`: exit 0, nothing on stderr. */
static struct test_run listing(const char *cmd)
{
    struct test_run r = run(cmd, NULL, NULL);
    if (r.status != 0) TEST_FAIL_("usched %s: exit %d\n%s", cmd, r.status, r.err);
    ASSERT_STR_EQ(r.err, "");
    return r;
}

static void test_policies(void)
{
    struct test_run r = listing("policies");
    int n = usched_policy_count();
    ASSERT_GT(n, 0);
    ASSERT_EQ(nlines(r.out), n);
    char line[512], want[512];
    for (int i = 0; i < n; i++) {
        ASSERT(line_of(r.out, i, line, sizeof line));
        snprintf(want, sizeof want, "%-8s %s%s", usched_policy_name(i), usched_policy_brief(i),
                 i == 0 ? " (default)" : "");
        ASSERT_STR_EQ(line, want);
    }
    ASSERT_STR_EQ(usched_policy_name(0), "usched");
    test_run_free(r);

    expect_usage_error(r = run("policies", "extra", NULL), 2, "usched policies: unexpected argument 'extra'");
    test_run_free(r);
    expect_usage_error(r = run("policies", "--bogus", NULL), 2, "usched policies: unknown option '--bogus'");
    test_run_free(r);
}

static void test_knobs(void)
{
    struct test_run r = listing("knobs");
    int n = usched_knob_count();
    ASSERT_GT(n, 0);
    ASSERT_EQ(nlines(r.out), 1 + 2 * n); /* a header, then two lines per knob */
    char line[512], desc[512], *f[16];
    ASSERT(line_of(r.out, 0, line, sizeof line));
    ASSERT_EQ(fields(line, f, 16), 7);
    ASSERT_STR_EQ(f[0], "knob");
    for (int i = 0; i < n; i++) {
        struct usched_knob_info k;
        ASSERT_OK(usched_knob_info(i, &k));
        ASSERT(line_of(r.out, 1 + 2 * i, line, sizeof line));
        ASSERT(line_of(r.out, 2 + 2 * i, desc, sizeof desc));
        if (fields(line, f, 16) != 6) TEST_FAIL_("knob %s: line '%s'", k.name, line);
        ASSERT_STR_EQ(f[0], k.name);
        ASSERT_STR_EQ(f[1], k.type);
        ASSERT_STR_EQ(f[2], k.def_text);
        ASSERT_STR_EQ(f[3], k.range_text);
        ASSERT_STR_EQ(f[4], k.runtime ? "yes" : "no");
        ASSERT_STR_EQ(f[5], k.policies);
        ASSERT(strncmp(desc, "    ", 4) == 0);
        ASSERT_STR_EQ(desc + 4, k.desc);
    }
    test_run_free(r);

    /* --check: the setting's values, every other knob at its default */
    r = run("knobs", "--check", "smt=0,scope=llc");
    ASSERT_EQ(r.status, 0);
    ASSERT_STR_EQ(r.err, "");
    ASSERT_EQ(nlines(r.out), n);
    for (int i = 0; i < n; i++) {
        struct usched_knob_info k;
        char want[128];
        ASSERT_OK(usched_knob_info(i, &k));
        const char *v = !strcmp(k.name, "smt") ? "0" : !strcmp(k.name, "scope") ? "llc" : k.def_text;
        snprintf(want, sizeof want, "%s=%s", k.name, v);
        ASSERT_STR_EQ(line_of(r.out, i, line, sizeof line), want);
    }
    test_run_free(r);

    expect_usage_error(r = run("knobs", "--check", "nosuch=1"), 1, "nosuch");
    test_run_free(r);
    expect_usage_error(r = run("knobs", "--check", "smt=7"), 1, "smt");
    test_run_free(r);
    expect_usage_error(r = run("knobs", "--check", NULL), 2, "usched knobs: option '--check' needs a value");
    test_run_free(r);
    expect_usage_error(r = run("knobs", "--bogus", NULL), 2, "usched knobs: unknown option '--bogus'");
    test_run_free(r);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s <usched binary>\n", argv[0]);
        return 2;
    }
    cli = argv[1];
    /* the per-policy environment must not change the listed defaults */
    unsetenv("USCHED_KNOBS");
    test_policies();
    test_knobs();
    printf("ok\n");
    return 0;
}
