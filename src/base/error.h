/* Error detail for usched_last_error(): one thread-local line per thread. */
#ifndef USCHED_ERROR_H
#define USCHED_ERROR_H

/* Records the detail of a failure on the calling thread and returns -err
 * (pass a positive errno), so callers can write
 *     return usched__error(EINVAL, "cpus: '%s' is empty", s);            */
int usched__error(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
