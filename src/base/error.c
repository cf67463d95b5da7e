/* Error codes and the thread-local error detail (usched_last_error). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/export.h"
#include "usched.h"

static USCHED_TLS char last_error[256];

int usched__error(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return -err;
}

USCHED_EXPORT const char *usched_last_error(void)
{
    return last_error;
}

/* The codes usched returns, with the text usched gives them. */
#define USCHED_ERRNO_MAP(X)                                                     \
    X(EINVAL, "invalid argument")                                               \
    X(ENOENT, "not found")                                                      \
    X(EBUSY, "busy: started already, or still in use")                          \
    X(ENOMEM, "out of memory")                                                  \
    X(EAGAIN, "operation would block")                                          \
    X(EPIPE, "channel closed")                                                  \
    X(ETIMEDOUT, "timed out")                                                   \
    X(EDEADLK, "would deadlock")                                                \
    X(ECANCELED, "canceled: the scheduler stopped first")                       \
    X(EPERM, "not allowed: outside a fiber, or not the owner")                  \
    X(ESRCH, "scheduler not started")                                           \
    X(ENOSPC, "no room left")                                                   \
    X(EOVERFLOW, "value out of range")

USCHED_EXPORT const char *usched_strerror(int err)
{
    if (err < 0) err = -err;
    switch (err) {
    case 0: return "success";
#define X(code, text) case code: return text;
    USCHED_ERRNO_MAP(X)
#undef X
    default: return strerror(err);
    }
}
