/*
 * A placement policy of your own: "firstidle" puts every spawned or woken
 * fiber on the first idle CPU it can claim, and on the waker's CPU when
 * none is idle. It implements one op, select_cpu; for every other op the
 * core's default applies (stealing in topology order, and so on).
 *
 * The policy registers itself with usched_policy_register() and is then
 * chosen like a built-in one, by name (or with USCHED_POLICY=firstidle).
 * The core checks every answer: a CPU out of range would be replaced by its
 * fallback and counted as pol_fallback.
 *
 *   cc custom_policy.c $(pkg-config --cflags --libs usched) -o custom_policy
 *   ./custom_policy
 */
#include <stdint.h>
#include <stdio.h>

#include <usched.h>
#include <usched/policy.h>

static void firstidle_select_cpu(usched_pol_ctx_t *ctx, const struct usched_select_args *args,
                                 struct usched_select_result *out)
{
    /* An idle CPU may be taken by a concurrent decision between finding and
     * claiming it: claim, and look again if another decision won. */
    for (int tries = 0; tries < 4; tries++) {
        int cpu = usched_pol_find_idle(ctx, NULL, 0, false);
        if (cpu < 0) break;
        if (usched_pol_claim_idle(ctx, cpu)) {
            out->cpu = cpu;
            out->reason = USCHED_REASON_IDLE_MACHINE;
            return;
        }
    }
    /* Nothing idle: stay where the waker is (CPU 0 for outside threads). */
    out->cpu = args->waker_cpu >= 0 ? args->waker_cpu : 0;
    out->reason = USCHED_REASON_STACKED;
    out->slot = USCHED_SLOT_TAIL;
}

static const struct usched_ops firstidle_ops = {
    .name = "firstidle",
    .brief = "example: the first idle CPU, else the waker's",
    .select_cpu = firstidle_select_cpu,
};

static void work(void *arg)
{
    volatile uint64_t *x = arg;
    for (int i = 0; i < 100000; i++) *x += (uint64_t)i;
}

int main(void)
{
    int r = usched_policy_register(&firstidle_ops);
    usched_t *s = NULL;
    if (r == 0) r = usched_create(&s);
    if (r == 0) r = usched_set(s, "policy", "firstidle");
    if (r == 0) r = usched_start(s);
    if (r < 0) {
        fprintf(stderr, "custom_policy: %s: %s\n", usched_strerror(r), usched_last_error());
        return 1;
    }

    enum { N = 100 };
    uint64_t sums[N] = {0};
    usched_task_t *t[N];
    for (int i = 0; i < N; i++) usched_spawn(s, &t[i], work, &sums[i]);
    for (int i = 0; i < N; i++) usched_join(t[i]);

    /* Every spawn went through the policy: counted as idle_machine or stacked. */
    uint64_t idle = 0, stacked = 0, fallback = 0;
    usched_stat(s, "place_idle_machine", &idle);
    usched_stat(s, "place_stacked", &stacked);
    usched_stat(s, "pol_fallback", &fallback);
    printf("policy firstidle: %llu placed on an idle CPU, %llu stacked, %llu fallbacks\n",
           (unsigned long long)idle, (unsigned long long)stacked, (unsigned long long)fallback);
    usched_destroy(s);

    int ok = idle + stacked >= N && fallback == 0;
    for (int i = 0; i < N; i++) ok = ok && sums[i] == 99999ull * 100000 / 2;
    printf("%s\n", ok ? "correct" : "WRONG");
    return ok ? 0 : 1;
}
