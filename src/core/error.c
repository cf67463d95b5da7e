/* Error codes and the thread-local error detail (usched_last_error). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "usched.h"
#include "core/error.h"

#include "core/export.h"

static __thread char last_error[256];

int usched__error(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return -err;
}

void usched__error_clear(void)
{
    last_error[0] = '\0';
}

USCHED_EXPORT const char *usched_last_error(void)
{
    return last_error;
}

/* The codes usched returns, with the text usched gives them. */
#define USCHED_ERRNO_MAP(X)                                                     \
    X(EINVAL, "invalid argument")                                               \
    X(ENOENT, "not found")                                                      \
    X(EBUSY, "scheduler already started")                                       \
    X(ENOMEM, "out of memory")                                                  \
    X(EAGAIN, "operation would block")                                          \
    X(EPIPE, "channel closed")                                                  \
    X(ETIMEDOUT, "timed out")                                                   \
    X(EDEADLK, "would deadlock")                                                \
    X(ECANCELED, "canceled: the scheduler stopped first")                       \
    X(EPERM, "not allowed outside a fiber")                                     \
    X(ESRCH, "scheduler not started")                                           \
    X(ENOSPC, "queue full")                                                     \
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
