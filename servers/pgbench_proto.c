/*
 * The PostgreSQL frontend/backend protocol, version 3, as far as pgbench and
 * psql need it with the simple query protocol, and a tokenizer that
 * recognises SQL statements by shape.
 *
 * A connection starts with a message without a type byte: int32 length,
 * int32 code. libpq first sends SSLRequest (and GSSENCRequest when it has
 * Kerberos credentials); the answer 'N' (not supported) makes it go on in
 * clear with the StartupMessage: protocol 3.0 and name/value pairs (user,
 * database, application_name). Every later message is a type byte, an
 * int32 length that counts itself, and a body. The server answers with the
 * same framing.
 */
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "proto.h"

ssize_t pg_parse_startup(const char *in, size_t n, struct pg_startup *s)
{
    if (n < 4) return 0;
    uint32_t len = srv_be32(in);
    if (len < 8 || len > PG_MAX_STARTUP) return -EPROTO;
    if (n < len) return 0;
    memset(s, 0, sizeof *s);
    s->code = srv_be32(in + 4);
    if (s->code >> 16 != 3) return (ssize_t)len; /* a request code or another version */
    /* name\0value\0 ... \0 */
    const char *p = in + 8, *end = in + len;
    while (p < end && *p) {
        const char *name = p;
        const char *nz = memchr(p, '\0', (size_t)(end - p));
        if (!nz) return -EPROTO;
        const char *value = nz + 1;
        const char *vz = value < end ? memchr(value, '\0', (size_t)(end - value)) : NULL;
        if (!vz) return -EPROTO;
        if (!strcmp(name, "user")) s->user = value;
        if (!strcmp(name, "database")) s->database = value;
        p = vz + 1;
    }
    if (p >= end) return -EPROTO; /* the list must end with an empty name */
    return (ssize_t)len;
}

ssize_t pg_parse_msg(const char *in, size_t n, struct pg_msg *m)
{
    if (n < 5) return 0;
    uint32_t len = srv_be32(in + 1);
    if (len < 4) return -EPROTO;
    if (len > PG_MAX_MESSAGE) return -EMSGSIZE;
    if (n < (size_t)len + 1) return 0;
    m->type = in[0];
    m->body = in + 5;
    m->len = len - 4;
    return (ssize_t)len + 1;
}

/* ---- replies ------------------------------------------------------------------------- */

/* Starts a message of the given type; returns where its length goes. */
static size_t msg_begin(struct srv_conn *c, char type)
{
    char hdr[5] = {type, 0, 0, 0, 0};
    srv_put(c, hdr, 5);
    return c->out_len - 4;
}

/* Fills in the length of the message begun at at. */
static void msg_end(struct srv_conn *c, size_t at)
{
    if (!c->out_failed) srv_put_be32(c->out + at, (uint32_t)(c->out_len - at));
}

static void put_i16(struct srv_conn *c, int v)
{
    unsigned char b[2] = {(unsigned char)((unsigned)v >> 8), (unsigned char)v};
    srv_put(c, b, 2);
}

static void put_i32(struct srv_conn *c, uint32_t v)
{
    char b[4];
    srv_put_be32(b, v);
    srv_put(c, b, 4);
}

static void put_cstr(struct srv_conn *c, const char *s)
{
    srv_put(c, s, strlen(s) + 1);
}

void pg_put_auth_ok(struct srv_conn *c)
{
    size_t at = msg_begin(c, 'R');
    put_i32(c, 0);
    msg_end(c, at);
}

void pg_put_param(struct srv_conn *c, const char *name, const char *value)
{
    size_t at = msg_begin(c, 'S');
    put_cstr(c, name);
    put_cstr(c, value);
    msg_end(c, at);
}

void pg_put_key_data(struct srv_conn *c, uint32_t pid, uint32_t key)
{
    size_t at = msg_begin(c, 'K');
    put_i32(c, pid);
    put_i32(c, key);
    msg_end(c, at);
}

void pg_put_ready(struct srv_conn *c, char status)
{
    size_t at = msg_begin(c, 'Z');
    srv_put(c, &status, 1);
    msg_end(c, at);
}

void pg_put_row_desc(struct srv_conn *c, int ncols, const char *const *names, const uint32_t *oids,
                     const int16_t *sizes)
{
    size_t at = msg_begin(c, 'T');
    put_i16(c, ncols);
    for (int i = 0; i < ncols; i++) {
        put_cstr(c, names[i]);
        put_i32(c, 0);                  /* table oid */
        put_i16(c, 0);                  /* column number */
        put_i32(c, oids[i]);            /* type */
        put_i16(c, sizes[i]);           /* type size */
        put_i32(c, UINT32_MAX);         /* type modifier -1 */
        put_i16(c, 0);                  /* text format */
    }
    msg_end(c, at);
}

void pg_put_data_row(struct srv_conn *c, int ncols, const char *const *values)
{
    size_t at = msg_begin(c, 'D');
    put_i16(c, ncols);
    for (int i = 0; i < ncols; i++) {
        if (!values[i]) {
            put_i32(c, UINT32_MAX); /* -1: NULL */
            continue;
        }
        size_t n = strlen(values[i]);
        put_i32(c, (uint32_t)n);
        srv_put(c, values[i], n);
    }
    msg_end(c, at);
}

void pg_put_complete(struct srv_conn *c, const char *tag)
{
    size_t at = msg_begin(c, 'C');
    put_cstr(c, tag);
    msg_end(c, at);
}

void pg_put_empty_query(struct srv_conn *c)
{
    msg_end(c, msg_begin(c, 'I'));
}

void pg_put_error(struct srv_conn *c, const char *severity, const char *sqlstate, const char *msg)
{
    size_t at = msg_begin(c, 'E');
    srv_put(c, "S", 1);
    put_cstr(c, severity);
    srv_put(c, "V", 1);
    put_cstr(c, severity);
    srv_put(c, "C", 1);
    put_cstr(c, sqlstate);
    srv_put(c, "M", 1);
    put_cstr(c, msg);
    srv_put(c, "", 1);
    msg_end(c, at);
}

/* ---- SQL tokens ------------------------------------------------------------------------ */

static bool word_start(char ch)
{
    return isalpha((unsigned char)ch) || ch == '_';
}

static bool word_char(char ch)
{
    return isalnum((unsigned char)ch) || ch == '_' || ch == '.' || ch == '$';
}

const char *pg_sql_token(const char *p, const char *end, struct pg_tok *t)
{
    for (;;) { /* white space and -- comments */
        while (p < end && isspace((unsigned char)*p)) p++;
        if (end - p >= 2 && p[0] == '-' && p[1] == '-') {
            while (p < end && *p != '\n') p++;
            continue;
        }
        break;
    }
    t->s = p;
    t->v = 0;
    if (p >= end) {
        t->kind = PG_TOK_END;
        t->n = 0;
        return p;
    }
    const char *q = p;
    if (word_start(*q)) {
        while (q < end && word_char(*q)) q++;
        t->kind = PG_TOK_WORD;
    } else if (isdigit((unsigned char)*q) || (*q == '-' && q + 1 < end && isdigit((unsigned char)q[1]))) {
        bool neg = *q == '-';
        uint64_t v = 0;
        bool overflow = false;
        if (neg) q++;
        while (q < end && isdigit((unsigned char)*q)) {
            if (v > (UINT64_C(1) << 62) / 5) overflow = true; /* v * 10 would pass 2^63 */
            v = v * 10 + (uint64_t)(*q++ - '0');
        }
        if (q < end && word_char(*q)) { /* 12abc */
            while (q < end && word_char(*q)) q++;
            overflow = true;
        }
        /* -9223372036854775808 is INT64_MIN, a valid bigint; its magnitude is
         * not an int64_t, so it is negated as unsigned (to itself) */
        if (v > (uint64_t)INT64_MAX + neg) overflow = true;
        t->kind = overflow ? PG_TOK_BAD : PG_TOK_INT;
        t->v = overflow ? 0 : neg ? (int64_t)(UINT64_C(0) - v) : (int64_t)v;
    } else if (*q == '\'' || *q == '"') {
        char quote = *q++;
        t->kind = PG_TOK_BAD; /* until the closing quote is seen */
        while (q < end) {
            if (*q++ != quote) continue;
            if (q < end && *q == quote) { /* a doubled quote stands for itself */
                q++;
                continue;
            }
            t->kind = quote == '"' ? PG_TOK_WORD : PG_TOK_STR;
            break;
        }
    } else {
        q++;
        t->kind = PG_TOK_PUNCT;
    }
    t->n = (size_t)(q - p);
    return q;
}

static bool tok_eq(const struct pg_tok *a, const struct pg_tok *b)
{
    if (a->kind != b->kind || a->n != b->n) return false;
    return a->kind == PG_TOK_WORD ? !strncasecmp(a->s, b->s, a->n) : !memcmp(a->s, b->s, a->n);
}

int pg_sql_match(const char *q, size_t n, const char *pattern, int64_t *args, int maxargs)
{
    const char *qe = q + n, *pe = pattern + strlen(pattern);
    const char *pp = pattern;
    int nargs = 0;
    for (;;) {
        struct pg_tok pt, qt;
        pp = pg_sql_token(pp, pe, &pt);
        if (pt.kind == PG_TOK_PUNCT && *pt.s == '.' && pe - pp >= 2 && !memcmp(pp, "..", 2))
            return nargs; /* "..." at the end: the rest is free */
        q = pg_sql_token(q, qe, &qt);
        if (pt.kind == PG_TOK_END) {
            while (qt.kind == PG_TOK_PUNCT && *qt.s == ';') q = pg_sql_token(q, qe, &qt);
            return qt.kind == PG_TOK_END ? nargs : -1;
        }
        if (pt.kind == PG_TOK_PUNCT && *pt.s == '?') {
            if (qt.kind != PG_TOK_INT || nargs >= maxargs) return -1;
            args[nargs++] = qt.v;
            continue;
        }
        if (!tok_eq(&pt, &qt)) return -1;
    }
}
