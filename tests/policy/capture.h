/*
 * Captures what the library writes on stderr (its warned-once messages)
 * between capture_begin() and capture_end(), for the policy tests.
 */
#ifndef USCHED_TEST_CAPTURE_H
#define USCHED_TEST_CAPTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

struct capture {
    char path[32];
    int fd, saved;
};

static inline void capture_begin(struct capture *c)
{
    strcpy(c->path, "/tmp/usched-stderr-XXXXXX");
    c->fd = mkstemp(c->path);
    ASSERT(c->fd >= 0);
    fflush(stderr);
    c->saved = dup(2);
    ASSERT(c->saved >= 0);
    dup2(c->fd, 2);
}

/* Restores stderr and returns what was written (at most len - 1 bytes). */
static inline const char *capture_end(struct capture *c, char *buf, size_t len)
{
    fflush(stderr);
    dup2(c->saved, 2);
    close(c->saved);
    lseek(c->fd, 0, SEEK_SET);
    ssize_t got = read(c->fd, buf, len - 1);
    buf[got > 0 ? got : 0] = '\0';
    close(c->fd);
    unlink(c->path);
    return buf;
}

/* Occurrences of needle in hay. */
static inline int capture_count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *q = hay; (q = strstr(q, needle)); q++) n++;
    return n;
}

#endif
