/* Allocation-failure injection (base/fault.h). */
#include "base/fault.h"

_Atomic long usched__fault_countdown;
static _Atomic long injected;

void usched__fault_arm(long n)
{
    atomic_store(&usched__fault_countdown, n > 0 ? n : 0);
}

long usched__fault_pending(void)
{
    return atomic_load(&usched__fault_countdown);
}

long usched__fault_injected(void)
{
    return atomic_load(&injected);
}

/* Counts down; the call that takes it from 1 to 0 fails. */
bool usched__fault_hit_slow(void)
{
    long n = atomic_load(&usched__fault_countdown);
    while (n > 0) {
        if (atomic_compare_exchange_weak(&usched__fault_countdown, &n, n - 1)) {
            if (n == 1) {
                atomic_fetch_add(&injected, 1);
                return true;
            }
            return false;
        }
    }
    return false;
}
