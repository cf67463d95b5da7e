/* Knobs and the policy listing through the public API only. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "test.h"
#include "usched.h"

static void bad(usched_t *s, const char *spec, int err, const char *mention)
{
    ASSERT_EQ(usched_set(s, "knobs", spec), -err);
    ASSERT_STR_CONTAINS(usched_last_error(), mention);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* listing */
    ASSERT_GE(usched_policy_count(), 5);
    const char *want[] = {"usched", "linux", "ule", "bsd4", "global"};
    for (int w = 0; w < 5; w++) {
        bool found = false;
        for (int i = 0; i < usched_policy_count(); i++)
            if (!strcmp(usched_policy_name(i), want[w])) {
                found = true;
                ASSERT(usched_policy_brief(i) && *usched_policy_brief(i));
            }
        if (!found) TEST_FAIL_("policy %s not listed", want[w]);
    }
    ASSERT(usched_policy_name(-1) == NULL);
    ASSERT(usched_policy_name(usched_policy_count()) == NULL);
    int nk = usched_knob_count();
    ASSERT_GE(nk, 7);
    const char *knobs[] = {"smt", "affine", "scope", "steal", "steal_thresh", "spin_us", "next_cap"};
    for (int w = 0; w < 7; w++) {
        bool found = false;
        for (int i = 0; i < nk; i++) {
            struct usched_knob_info k;
            ASSERT_OK(usched_knob_info(i, &k));
            ASSERT(k.desc && *k.desc && k.policies && *k.policies);
            if (!strcmp(k.name, knobs[w])) found = true;
        }
        if (!found) TEST_FAIL_("knob %s not listed", knobs[w]);
    }
    struct usched_knob_info k;
    ASSERT_EQ(usched_knob_info(nk, &k), -EINVAL);
    ASSERT_EQ(usched_knob_info(0, NULL), -EINVAL);

    /* setting: bad input names the knob and the problem */
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    bad(s, "nosuch=1", EINVAL, "nosuch");
    bad(s, "smt=2", EINVAL, "smt");
    bad(s, "smt=yes", EINVAL, "smt");
    bad(s, "steal_thresh=0", EINVAL, "steal_thresh");
    bad(s, "scope=galaxy", EINVAL, "galaxy");
    bad(s, "affine", EINVAL, "affine");
    int64_t v;
    ASSERT_EQ(usched_knob_get(s, "nosuch", &v), -EINVAL);
    ASSERT_OK(usched_knob_get(s, "smt", &v));
    ASSERT_EQ(v, 1); /* nothing changed by the failures */
    ASSERT_OK(usched_set(s, "knobs", "smt=0,affine=0,scope=llc"));
    ASSERT_OK(usched_knob_get(s, "scope", &v));
    ASSERT_EQ(v, 2);
    ASSERT_OK(usched_set(s, "topology", "pack:1 l3:1 l2:2 core:1 pu:2"));
    ASSERT_OK(usched_start(s));
    /* smt and affine change while running */
    ASSERT_OK(usched_set(s, "knobs", "smt=1,affine=1"));
    ASSERT_OK(usched_knob_get(s, "smt", &v));
    ASSERT_EQ(v, 1);
    bad(s, "affine=7", EINVAL, "affine");
    ASSERT_EQ(usched_set(s, "policy", "ule"), -EBUSY);
    ASSERT_OK(usched_destroy(s));

    /* the environment */
    setenv("USCHED_KNOBS", "smt=0,bogus=1", 1);
    ASSERT_EQ(usched_create(&s), -EINVAL);
    ASSERT_STR_CONTAINS(usched_last_error(), "bogus");
    setenv("USCHED_KNOBS", "smt=0", 1);
    setenv("USCHED_POLICY", "ule", 1);
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_knob_get(s, "smt", &v));
    ASSERT_EQ(v, 0);
    ASSERT_OK(usched_destroy(s));
    setenv("USCHED_POLICY", "nosuchpolicy", 1);
    ASSERT_EQ(usched_create(&s), -EINVAL);
    ASSERT_STR_CONTAINS(usched_last_error(), "nosuchpolicy");
    printf("ok\n");
    return 0;
}
