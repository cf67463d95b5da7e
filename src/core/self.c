/* The calling thread's worker (self.h). */
#include "base/export.h"
#include "core/self.h"

static USCHED_TLS struct usched__wk *tls_wk;

struct usched__wk *usched__self_wk(void) __attribute__((noinline));
struct usched__wk *usched__self_wk(void)
{
    __asm__ volatile("" ::: "memory");
    return tls_wk;
}

void usched__self_set(struct usched__wk *w)
{
    tls_wk = w;
}
