/*
 * usched serve pgbench: enough of a PostgreSQL server for pgbench's
 * built-in scripts, select-only (-S) and tpcb-like (the default), with the
 * simple query protocol (-M simple, the default), and for psql to run the
 * same statements. The four pgbench tables live in memory, created at
 * start-up at the given scale as `pgbench -i` would: 100,000 accounts,
 * 10 tellers and 1 branch per scale unit, all balances 0, no history.
 * Any user and database name are accepted without a password, as with
 * PostgreSQL's `trust` authentication. pgbench must run with -n (no vacuum).
 *
 * Statements are recognised by shape (pgbench_proto.c's pg_sql_match), not
 * parsed as SQL: the table `statements` below lists every one understood.
 *
 * Transactions are real: an UPDATE locks its row (a usched_mutex_t per row)
 * until COMMIT or ROLLBACK, so clients updating the same branch wait for each
 * other as they would in PostgreSQL, and a connection lost mid-transaction
 * rolls back. Locks are taken in one order (accounts, tellers, branches; by
 * id within a table) so pgbench never deadlocks; a statement that would lock
 * out of that order waits at most a second and then fails as PostgreSQL's
 * deadlock detector would (SQLSTATE 40P01). After any run,
 *   sum(abalance) = sum(tbalance) = sum(bbalance) = sum(delta)
 * which the same SELECTs check from psql, and pgdb_check at shutdown.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fault.h"
#include "proto.h"

#define PG_MAX_SCALE 100  /* 10 million accounts, about 600 MB */
#define PG_MAX_LOCKS 64   /* row locks one transaction may hold */
#define PG_MAX_PENDING 64 /* history rows one transaction may insert */
#define PG_LOCK_WAIT_NS (1000 * 1000 * 1000) /* out-of-order lock wait before 40P01 */

enum { T_ACCOUNTS, T_TELLERS, T_BRANCHES, T_NTABLES };

static const int64_t rows_per_scale[T_NTABLES] = {100000, 10, 1};

struct row {
    _Atomic int64_t balance; /* written under lock; read by SELECTs without it, as MVCC would */
    usched_mutex_t lock;
};

struct history_row {
    int64_t tid, bid, aid, delta;
};

struct pgdb {
    int scale;
    int64_t nrows[T_NTABLES];
    struct row *rows[T_NTABLES]; /* index id - 1 */
    usched_mutex_t history_lock;
    struct history_row *history; /* history_lock */
    size_t nhistory, cap_history;
    atomic_uint next_pid; /* BackendKeyData: a distinct number per connection */
};

struct held {
    int table;
    int64_t id;
    int64_t undo; /* delta applied under this lock, reversed on rollback */
};

struct pg_session {
    struct pgdb *db;
    bool started;   /* StartupMessage handled */
    bool ext_error; /* extended protocol refused: skip until Sync */
    char txn;       /* 'I' idle, 'T' in a transaction, 'E' failed transaction */
    struct held held[PG_MAX_LOCKS];
    int nheld;
    struct history_row pending[PG_MAX_PENDING];
    int npending;
};

/* ---- tables ------------------------------------------------------------------------- */

int pgdb_create(int scale, struct pgdb **out, char *err, size_t len)
{
    if (scale < 1 || scale > PG_MAX_SCALE) {
        snprintf(err, len, "scale %d: must be in [1, %d]", scale, PG_MAX_SCALE);
        return -EINVAL;
    }
    struct pgdb *db = usched__calloc(1, sizeof *db);
    if (!db) goto oom;
    db->scale = scale;
    for (int t = 0; t < T_NTABLES; t++) {
        db->nrows[t] = rows_per_scale[t] * scale;
        db->rows[t] = usched__calloc((size_t)db->nrows[t], sizeof(struct row));
        if (!db->rows[t]) goto oom;
        for (int64_t i = 0; i < db->nrows[t]; i++) usched_mutex_init(&db->rows[t][i].lock);
    }
    usched_mutex_init(&db->history_lock);
    *out = db;
    return 0;
oom:
    pgdb_free(db);
    snprintf(err, len, "out of memory for the tables at scale %d", scale);
    return -ENOMEM;
}

void pgdb_free(struct pgdb *db)
{
    if (!db) return;
    for (int t = 0; t < T_NTABLES; t++) free(db->rows[t]);
    free(db->history);
    free(db);
}

static int64_t table_sum(const struct pgdb *db, int t)
{
    int64_t sum = 0;
    for (int64_t i = 0; i < db->nrows[t]; i++)
        sum += atomic_load_explicit(&db->rows[t][i].balance, memory_order_relaxed);
    return sum;
}

static int64_t history_sum(struct pgdb *db, size_t *count)
{
    int64_t sum = 0;
    usched_mutex_lock(&db->history_lock);
    for (size_t i = 0; i < db->nhistory; i++) sum += db->history[i].delta;
    *count = db->nhistory;
    usched_mutex_unlock(&db->history_lock);
    return sum;
}

int pgdb_check(struct pgdb *db, char *msg, size_t len)
{
    size_t nh;
    int64_t a = table_sum(db, T_ACCOUNTS), t = table_sum(db, T_TELLERS), b = table_sum(db, T_BRANCHES);
    int64_t h = history_sum(db, &nh);
    if (a != h || t != h || b != h) {
        snprintf(msg, len,
                 "balances disagree: sum(abalance) %" PRId64 ", sum(tbalance) %" PRId64
                 ", sum(bbalance) %" PRId64 ", sum(delta) %" PRId64 " over %zu history rows",
                 a, t, b, h, nh);
        return -1;
    }
    snprintf(msg, len, "balances agree: every table sums to %" PRId64 " over %zu history rows", h, nh);
    return 0;
}

/* ---- locks and transactions ----------------------------------------------------------- */

static struct held *find_held(struct pg_session *s, int table, int64_t id)
{
    for (int i = 0; i < s->nheld; i++)
        if (s->held[i].table == table && s->held[i].id == id) return &s->held[i];
    return NULL;
}

/* Whether (table, id) comes after every lock held: then waiting cannot
 * close a cycle. */
static bool in_order(const struct pg_session *s, int table, int64_t id)
{
    for (int i = 0; i < s->nheld; i++)
        if (s->held[i].table > table || (s->held[i].table == table && s->held[i].id > id)) return false;
    return true;
}

/* Locks a row for the session; NULL with *state and *msg set on failure. */
static struct held *lock_row(struct pg_session *s, int table, int64_t id, const char **state, const char **msg)
{
    struct held *h = find_held(s, table, id);
    if (h) return h;
    if (s->nheld == PG_MAX_LOCKS) {
        *state = "53400";
        *msg = "too many rows locked in one transaction";
        return NULL;
    }
    usched_mutex_t *m = &s->db->rows[table][id - 1].lock;
    if (in_order(s, table, id)) {
        usched_mutex_lock(m);
    } else {
        uint64_t waited = 0;
        while (usched_mutex_trylock(m) != 0) {
            if (waited >= PG_LOCK_WAIT_NS) {
                *state = "40P01";
                *msg = "deadlock detected (rows locked out of order waited one second)";
                return NULL;
            }
            usched_sleep_ns(1000 * 1000);
            waited += 1000 * 1000;
        }
    }
    h = &s->held[s->nheld++];
    *h = (struct held){.table = table, .id = id};
    return h;
}

static void unlock_all(struct pg_session *s)
{
    for (int i = s->nheld - 1; i >= 0; i--)
        usched_mutex_unlock(&s->db->rows[s->held[i].table][s->held[i].id - 1].lock);
    s->nheld = 0;
}

/* Appends history rows; false when out of memory (nothing appended). */
static bool history_append(struct pgdb *db, const struct history_row *rows, int n)
{
    bool ok = true;
    usched_mutex_lock(&db->history_lock);
    if (db->nhistory + (size_t)n > db->cap_history) {
        size_t cap = db->cap_history ? db->cap_history * 2 : 4096;
        while (cap < db->nhistory + (size_t)n) cap *= 2;
        struct history_row *nh = usched__realloc(db->history, cap * sizeof *nh);
        if (nh) {
            db->history = nh;
            db->cap_history = cap;
        }
        ok = nh != NULL;
    }
    if (ok) {
        memcpy(db->history + db->nhistory, rows, (size_t)n * sizeof *rows);
        db->nhistory += (size_t)n;
    }
    usched_mutex_unlock(&db->history_lock);
    return ok;
}

static void txn_rollback(struct pg_session *s)
{
    for (int i = 0; i < s->nheld; i++)
        atomic_fetch_sub_explicit(&s->db->rows[s->held[i].table][s->held[i].id - 1].balance,
                                  s->held[i].undo, memory_order_relaxed);
    s->npending = 0;
    unlock_all(s);
    s->txn = 'I';
}

/* Commits: the history rows go in, the locks go. Out of memory for the
 * history, it rolls back instead and returns false. */
static bool txn_commit(struct pg_session *s)
{
    if (s->npending && !history_append(s->db, s->pending, s->npending)) {
        txn_rollback(s);
        return false;
    }
    s->npending = 0;
    unlock_all(s);
    s->txn = 'I';
    return true;
}

static const char oom_state[] = "53200", oom_msg[] = "out of memory for the history rows";

/* ---- statements --------------------------------------------------------------------------- */

/* id, pattern ('?' an integer; "..." the rest) */
#define PG_STATEMENTS(X)                                                                        \
    X(SELECT_ABALANCE, "select abalance from pgbench_accounts where aid = ?")                  \
    X(UPDATE_ACCOUNTS, "update pgbench_accounts set abalance = abalance + ? where aid = ?")    \
    X(UPDATE_TELLERS, "update pgbench_tellers set tbalance = tbalance + ? where tid = ?")      \
    X(UPDATE_BRANCHES, "update pgbench_branches set bbalance = bbalance + ? where bid = ?")    \
    X(INSERT_HISTORY, "insert into pgbench_history (tid, bid, aid, delta, mtime) "             \
                      "values (?, ?, ?, ?, current_timestamp)")                                \
    X(BEGIN, "begin")                                                                          \
    X(START, "start transaction")                                                              \
    X(COMMIT, "commit")                                                                        \
    X(END, "end")                                                                              \
    X(ROLLBACK, "rollback")                                                                    \
    X(ABORT, "abort")                                                                          \
    X(COUNT_BRANCHES, "select count(*) from pgbench_branches")                                 \
    X(COUNT_TELLERS, "select count(*) from pgbench_tellers")                                   \
    X(COUNT_ACCOUNTS, "select count(*) from pgbench_accounts")                                 \
    X(COUNT_HISTORY, "select count(*) from pgbench_history")                                   \
    X(SUM_ABALANCE, "select sum(abalance) from pgbench_accounts")                              \
    X(SUM_TBALANCE, "select sum(tbalance) from pgbench_tellers")                               \
    X(SUM_BBALANCE, "select sum(bbalance) from pgbench_branches")                              \
    X(SUM_DELTA, "select sum(delta) from pgbench_history")                                     \
    X(PARTITIONS, "select o.n, p.partstrat, pg_catalog.count(i.inhparent) "                    \
                  "from pg_catalog.pg_class ...")

enum {
#define X(id, pattern) ST_##id,
    PG_STATEMENTS(X)
#undef X
    ST_COUNT
};

static const char *const statements[ST_COUNT] = {
#define X(id, pattern) pattern,
    PG_STATEMENTS(X)
#undef X
};

#define OID_CHAR 18
#define OID_INT8 20
#define OID_INT4 23

/* One row of one integer column (NULL when null is set). */
static void put_int_result(struct srv_conn *c, const char *col, uint32_t oid, int64_t v, bool null)
{
    char buf[32];
    const char *val = buf;
    int16_t size = oid == OID_INT8 ? 8 : 4;
    snprintf(buf, sizeof buf, "%" PRId64, v);
    if (null) val = NULL;
    pg_put_row_desc(c, 1, &col, &oid, &size);
    pg_put_data_row(c, 1, &val);
    pg_put_complete(c, "SELECT 1");
}

static void put_update(struct srv_conn *c, bool found)
{
    pg_put_complete(c, found ? "UPDATE 1" : "UPDATE 0");
}

/* UPDATE <table> SET balance = balance + delta WHERE id = id. */
static int do_update(struct pg_session *s, struct srv_conn *c, int table, int64_t delta, int64_t id,
                     const char **state, const char **msg)
{
    if (id < 1 || id > s->db->nrows[table]) {
        put_update(c, false);
        return 0;
    }
    bool autocommit = s->txn == 'I';
    struct held *h = lock_row(s, table, id, state, msg);
    if (!h) return -1;
    /* the balance columns are integer (int4): a sum outside it is an error,
     * as in PostgreSQL, and changes nothing; checked under the row's lock */
    _Atomic int64_t *bal = &s->db->rows[table][id - 1].balance;
    int64_t old = atomic_load_explicit(bal, memory_order_relaxed), sum;
    if (__builtin_add_overflow(old, delta, &sum) || sum < INT32_MIN || sum > INT32_MAX) {
        if (autocommit) txn_rollback(s); /* releases the row */
        *state = "22003";
        *msg = "integer out of range";
        return -1;
    }
    atomic_store_explicit(bal, sum, memory_order_relaxed);
    h->undo += delta; /* |undo| stays below 2^32: every balance it covers stays an int4 */
    if (autocommit) txn_commit(s); /* no history rows pending: cannot fail */
    put_update(c, true);
    return 0;
}

/* Runs one statement [q, q + n). 0, or -1 with *state and *msg saying why
 * it failed (the caller answers the error). */
static int exec_statement(struct pg_session *s, struct srv_conn *c, const char *q, size_t n,
                          const char **state, const char **msg)
{
    int64_t a[4];
    int st;
    for (st = 0; st < ST_COUNT; st++)
        if (pg_sql_match(q, n, statements[st], a, 4) >= 0) break;
    if (st == ST_COUNT) {
        *state = "42601";
        *msg = "statement not supported by usched serve pgbench (see docs/servers.md)";
        return -1;
    }
    bool closing = st == ST_COMMIT || st == ST_END || st == ST_ROLLBACK || st == ST_ABORT;
    if (s->txn == 'E' && !closing) {
        *state = "25P02";
        *msg = "current transaction is aborted, commands ignored until end of transaction block";
        return -1;
    }
    struct pgdb *db = s->db;
    size_t nh;
    switch (st) {
    case ST_SELECT_ABALANCE: {
        if (a[0] < 1 || a[0] > db->nrows[T_ACCOUNTS]) {
            const char *col = "abalance";
            uint32_t oid = OID_INT4;
            int16_t size = 4;
            pg_put_row_desc(c, 1, &col, &oid, &size);
            pg_put_complete(c, "SELECT 0");
            return 0;
        }
        int64_t v = atomic_load_explicit(&db->rows[T_ACCOUNTS][a[0] - 1].balance, memory_order_relaxed);
        put_int_result(c, "abalance", OID_INT4, v, false);
        return 0;
    }
    case ST_UPDATE_ACCOUNTS: return do_update(s, c, T_ACCOUNTS, a[0], a[1], state, msg);
    case ST_UPDATE_TELLERS: return do_update(s, c, T_TELLERS, a[0], a[1], state, msg);
    case ST_UPDATE_BRANCHES: return do_update(s, c, T_BRANCHES, a[0], a[1], state, msg);
    case ST_INSERT_HISTORY: {
        for (int i = 0; i < 4; i++) /* pgbench_history's columns are integer (int4) */
            if (a[i] < INT32_MIN || a[i] > INT32_MAX) {
                *state = "22003";
                *msg = "integer out of range";
                return -1;
            }
        struct history_row r = {.tid = a[0], .bid = a[1], .aid = a[2], .delta = a[3]};
        if (s->txn == 'I') {
            if (!history_append(db, &r, 1)) {
                *state = oom_state;
                *msg = oom_msg;
                return -1;
            }
        } else if (s->npending == PG_MAX_PENDING) {
            *state = "53400";
            *msg = "too many history rows in one transaction";
            return -1;
        } else {
            s->pending[s->npending++] = r;
        }
        pg_put_complete(c, "INSERT 0 1");
        return 0;
    }
    case ST_BEGIN:
    case ST_START:
        if (s->txn == 'I') s->txn = 'T'; /* PostgreSQL warns about a nested BEGIN and goes on */
        pg_put_complete(c, "BEGIN");
        return 0;
    case ST_COMMIT:
    case ST_END: {
        bool failed = s->txn == 'E';
        if (failed) {
            txn_rollback(s);
        } else if (!txn_commit(s)) {
            *state = oom_state;
            *msg = oom_msg;
            return -1;
        }
        pg_put_complete(c, failed ? "ROLLBACK" : "COMMIT");
        return 0;
    }
    case ST_ROLLBACK:
    case ST_ABORT:
        txn_rollback(s);
        pg_put_complete(c, "ROLLBACK");
        return 0;
    case ST_COUNT_BRANCHES: put_int_result(c, "count", OID_INT8, db->nrows[T_BRANCHES], false); return 0;
    case ST_COUNT_TELLERS: put_int_result(c, "count", OID_INT8, db->nrows[T_TELLERS], false); return 0;
    case ST_COUNT_ACCOUNTS: put_int_result(c, "count", OID_INT8, db->nrows[T_ACCOUNTS], false); return 0;
    case ST_COUNT_HISTORY:
        history_sum(db, &nh);
        put_int_result(c, "count", OID_INT8, (int64_t)nh, false);
        return 0;
    case ST_SUM_ABALANCE: put_int_result(c, "sum", OID_INT8, table_sum(db, T_ACCOUNTS), false); return 0;
    case ST_SUM_TBALANCE: put_int_result(c, "sum", OID_INT8, table_sum(db, T_TELLERS), false); return 0;
    case ST_SUM_BBALANCE: put_int_result(c, "sum", OID_INT8, table_sum(db, T_BRANCHES), false); return 0;
    case ST_SUM_DELTA: {
        int64_t sum = history_sum(db, &nh);
        put_int_result(c, "sum", OID_INT8, sum, nh == 0); /* sum over no rows is NULL */
        return 0;
    }
    case ST_PARTITIONS: {
        /* pgbench asks whether pgbench_accounts is partitioned: it is not */
        const char *names[3] = {"n", "partstrat", "count"};
        const uint32_t oids[3] = {OID_INT4, OID_CHAR, OID_INT8};
        const int16_t sizes[3] = {4, 1, 8};
        const char *vals[3] = {"1", NULL, "0"};
        pg_put_row_desc(c, 3, names, oids, sizes);
        pg_put_data_row(c, 3, vals);
        pg_put_complete(c, "SELECT 1");
        return 0;
    }
    }
    return 0;
}

/* A Query message: every statement in it, then ReadyForQuery. */
static void exec_query(struct pg_session *s, struct srv_conn *c, const char *q, size_t n)
{
    const char *p = q, *end = q + n;
    bool any = false;
    while (p < end && srv_drain(c) == 0) { /* a long query string's replies go out as they come */
        /* the statement runs to the next ';' token */
        const char *start = p, *stop = p;
        struct pg_tok t;
        for (;;) {
            const char *next = pg_sql_token(p, end, &t);
            if (t.kind == PG_TOK_END || (t.kind == PG_TOK_PUNCT && *t.s == ';')) {
                stop = t.kind == PG_TOK_END ? end : t.s;
                p = next;
                break;
            }
            p = next;
        }
        struct pg_tok first;
        pg_sql_token(start, stop, &first);
        if (first.kind == PG_TOK_END) {
            if (t.kind == PG_TOK_END) break;
            continue; /* an empty statement between two ';' */
        }
        any = true;
        const char *state, *msg;
        if (exec_statement(s, c, start, (size_t)(stop - start), &state, &msg) < 0) {
            pg_put_error(c, "ERROR", state, msg);
            if (s->txn == 'T') { /* the transaction is aborted: its locks go now */
                txn_rollback(s);
                s->txn = 'E';
            }
            break; /* PostgreSQL skips the rest of the query string after an error */
        }
        if (t.kind == PG_TOK_END) break;
    }
    if (!any) pg_put_empty_query(c);
    pg_put_ready(c, s->txn);
}

static void startup_reply(struct pg_session *s, struct srv_conn *c, const struct pg_startup *su)
{
    static const char *const params[][2] = {
        {"server_version", "15.0"},
        {"server_encoding", "UTF8"},
        {"client_encoding", "UTF8"},
        {"DateStyle", "ISO, MDY"},
        {"integer_datetimes", "on"},
        {"standard_conforming_strings", "on"},
        {"TimeZone", "UTC"},
        {"is_superuser", "on"},
    };
    pg_put_auth_ok(c);
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) pg_put_param(c, params[i][0], params[i][1]);
    if (su->user) pg_put_param(c, "session_authorization", su->user);
    uint32_t pid = atomic_fetch_add_explicit(&s->db->next_pid, 1, memory_order_relaxed);
    pg_put_key_data(c, (uint32_t)getpid() ^ (pid << 16), pid * 2654435761u);
    pg_put_ready(c, 'I');
}

static ssize_t pg_step(void *st, struct srv_conn *c, const char *in, size_t n)
{
    struct pg_session *s = st;
    if (!s->started) {
        struct pg_startup su;
        ssize_t k = pg_parse_startup(in, n, &su);
        if (k <= 0) return k; /* a bad startup packet: PostgreSQL closes without a word */
        if (su.code == PG_SSL_REQUEST || su.code == PG_GSSENC_REQUEST) {
            srv_put(c, "N", 1); /* in clear, please */
            return k;
        }
        if (su.code == PG_CANCEL_REQUEST) return -ECONNABORTED; /* nothing runs long enough to cancel */
        if (su.code >> 16 != 3) {
            pg_put_error(c, "FATAL", "0A000", "unsupported frontend protocol: usched serve pgbench speaks 3.0");
            return -EPROTO;
        }
        startup_reply(s, c, &su);
        s->started = true;
        return k;
    }
    struct pg_msg m;
    ssize_t k = pg_parse_msg(in, n, &m);
    if (k == -EMSGSIZE) {
        pg_put_error(c, "FATAL", "54000", "message longer than 1 MiB");
        return k;
    }
    if (k < 0) {
        pg_put_error(c, "FATAL", "08P01", "invalid message length");
        return k;
    }
    if (k == 0) return 0;
    switch (m.type) {
    case 'Q':
        if (m.len == 0 || m.body[m.len - 1] != '\0' || memchr(m.body, '\0', m.len) != m.body + m.len - 1) {
            pg_put_error(c, "FATAL", "08P01", "query string is not a single terminated string");
            return -EPROTO;
        }
        if (s->ext_error) return k;
        c->requests++;
        exec_query(s, c, m.body, m.len - 1);
        return k;
    case 'X': return -ECONNRESET; /* Terminate: the client leaves */
    case 'S':                     /* Sync: the end of a refused extended-protocol batch */
        s->ext_error = false;
        pg_put_ready(c, s->txn);
        return k;
    case 'P': case 'B': case 'D': case 'E': case 'C': case 'H': case 'F':
        if (!s->ext_error)
            pg_put_error(c, "ERROR", "0A000",
                         "extended query protocol not supported: run pgbench with -M simple");
        s->ext_error = true;
        return k;
    default: {
        char msg[64];
        snprintf(msg, sizeof msg, "invalid frontend message type %d", (unsigned char)m.type);
        pg_put_error(c, "FATAL", "08P01", msg);
        return -EPROTO;
    }
    }
}

/* Over max_conns: PostgreSQL's answer, after the startup packet (an SSL
 * or GSS request first gets its 'N'). */
static ssize_t pg_refuse(void *st, struct srv_conn *c, const char *in, size_t n)
{
    (void)st;
    struct pg_startup su;
    ssize_t k = pg_parse_startup(in, n, &su);
    if (k <= 0) return k;
    if (su.code == PG_SSL_REQUEST || su.code == PG_GSSENC_REQUEST) {
        srv_put(c, "N", 1);
        return k;
    }
    if (su.code != PG_CANCEL_REQUEST) pg_put_error(c, "FATAL", "53300", "sorry, too many clients already");
    return -EBUSY;
}

struct pg_session *pg_session_new(struct pgdb *db)
{
    struct pg_session *s = usched__calloc(1, sizeof *s);
    if (s) {
        s->db = db;
        s->txn = 'I';
    }
    return s;
}

void pg_session_free(struct pg_session *s)
{
    if (!s) return;
    txn_rollback(s); /* a connection lost mid-transaction leaves nothing behind */
    free(s);
}

ssize_t pg_feed(struct pg_session *s, struct srv_conn *c, const void *in, size_t n)
{
    return srv_conn_feed(c, pg_step, s, in, n);
}

/* ---- the server ----------------------------------------------------------------------------- */

static int pgbench_init(const struct srv_opts *o, void **state, char *err, size_t len)
{
    return pgdb_create(o->scale ? o->scale : 1, (struct pgdb **)state, err, len);
}

static void pgbench_conn(void *state, struct srv_conn *c)
{
    struct pg_session *s = pg_session_new(state);
    if (!s) {
        c->out_failed = true; /* counted as a connection ended for lack of memory */
        return;
    }
    srv_conn_run(c, pg_step, s);
    pg_session_free(s);
}

static int pgbench_check(void *state, char *msg, size_t len)
{
    return pgdb_check(state, msg, len);
}

static void pgbench_fini(void *state)
{
    pgdb_free(state);
}

const struct srv_proto srv_proto_pgbench = {
    .name = "pgbench",
    .default_port = 5432,
    .summary = "PostgreSQL v3 simple queries over in-memory pgbench tables",
    .in_max = PG_MAX_MESSAGE + 5,
    .refuse = pg_refuse,
    .init = pgbench_init,
    .conn = pgbench_conn,
    .check = pgbench_check,
    .fini = pgbench_fini,
};
