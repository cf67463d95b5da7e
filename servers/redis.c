/*
 * usched serve redis: a RESP2 server with an in-memory keyspace shared by
 * every connection, enough for `redis-benchmark -t
 * ping,set,get,incr,lpush,rpush,lpop,rpop,mset` (any -P pipeline depth) and
 * for redis-cli. Commands: the table `commands` below. Values are strings
 * or lists; the keyspace is split into shards, each a hash table under a
 * usched_mutex_t, so connections on different CPUs rarely meet on a lock.
 * Multi-key commands (DEL, EXISTS, MSET, MGET) take the keys one at a time:
 * unlike redis, another client may see an MSET half done.
 *
 * Replies of every complete command in the input are batched into one
 * write (server.c), as redis does per event-loop turn: a client pipelining
 * 16 commands gets 16 replies in one segment. A protocol error is answered
 * with -ERR and ends the connection, as in redis.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "base/fault.h"
#include "proto.h"

#define RDB_SHARDS 64           /* a power of two */
#define RDB_MAX_REQUEST (8 << 20) /* pending input of one connection */

enum vtype { V_STRING, V_LIST };

struct blob {
    char *p;
    size_t n;
};

struct list { /* a ring of blobs */
    struct blob *items;
    size_t head, count, cap;
};

struct entry {
    struct entry *next;
    uint64_t hash;
    struct blob key;
    enum vtype type;
    struct blob str;
    struct list list;
};

struct shard {
    usched_mutex_t lock;
    struct entry **buckets; /* lock */
    size_t nbuckets, count; /* lock */
} __attribute__((aligned(64)));

struct rdb {
    struct shard shards[RDB_SHARDS];
    uint64_t hash_key[2]; /* from getrandom(2) at creation */
};

/* ---- keyspace ------------------------------------------------------------------------- */

/* SipHash-1-3 (Aumasson and Bernstein's SipHash with one compression and
 * three finalisation rounds, as redis hashes its keys): keyed with a random
 * key per process, so a client cannot choose keys that collide. */
#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                  \
    do {                                                                                          \
        v0 += v1, v1 = ROTL(v1, 13), v1 ^= v0, v0 = ROTL(v0, 32);                                 \
        v2 += v3, v3 = ROTL(v3, 16), v3 ^= v2;                                                    \
        v0 += v3, v3 = ROTL(v3, 21), v3 ^= v0;                                                    \
        v2 += v1, v1 = ROTL(v1, 17), v1 ^= v2, v2 = ROTL(v2, 32);                                 \
    } while (0)

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

uint64_t rdb_siphash13(const uint64_t key[2], const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t v0 = key[0] ^ UINT64_C(0x736f6d6570736575), v1 = key[1] ^ UINT64_C(0x646f72616e646f6d);
    uint64_t v2 = key[0] ^ UINT64_C(0x6c7967656e657261), v3 = key[1] ^ UINT64_C(0x7465646279746573);
    size_t whole = n & ~(size_t)7;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m = le64(p + i);
        v3 ^= m;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t last = (uint64_t)n << 56;
    for (size_t i = 0; i < (n & 7); i++) last |= (uint64_t)p[whole + i] << (8 * i);
    v3 ^= last;
    SIPROUND;
    v0 ^= last;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

static uint64_t hash_bytes(const struct rdb *db, const char *p, size_t n)
{
    return rdb_siphash13(db->hash_key, p, n);
}

static bool blob_set(struct blob *b, const char *p, size_t n)
{
    char *nb = usched__malloc(n ? n : 1);
    if (!nb) return false;
    memcpy(nb, p, n);
    free(b->p);
    b->p = nb;
    b->n = n;
    return true;
}

static void entry_free(struct entry *e)
{
    free(e->key.p);
    free(e->str.p);
    for (size_t i = 0; i < e->list.count; i++) free(e->list.items[(e->list.head + i) % e->list.cap].p);
    free(e->list.items);
    free(e);
}

int rdb_create(struct rdb **out)
{
    struct rdb *db = usched__aligned_alloc(64, sizeof *db);
    if (!db) return -ENOMEM;
    memset(db, 0, sizeof *db);
    if (getrandom(db->hash_key, sizeof db->hash_key, 0) != (ssize_t)sizeof db->hash_key) {
        int e = errno ? -errno : -EIO;
        free(db);
        return e;
    }
    for (int i = 0; i < RDB_SHARDS; i++) usched_mutex_init(&db->shards[i].lock);
    *out = db;
    return 0;
}

static void shard_clear(struct shard *sh)
{
    for (size_t b = 0; b < sh->nbuckets; b++)
        for (struct entry *e = sh->buckets[b], *next; e; e = next) {
            next = e->next;
            entry_free(e);
        }
    free(sh->buckets);
    sh->buckets = NULL;
    sh->nbuckets = sh->count = 0;
}

void rdb_free(struct rdb *db)
{
    if (!db) return;
    for (int i = 0; i < RDB_SHARDS; i++) {
        shard_clear(&db->shards[i]);
        usched_mutex_destroy(&db->shards[i].lock);
    }
    free(db);
}

size_t rdb_longest_chain(struct rdb *db)
{
    size_t longest = 0;
    for (int i = 0; i < RDB_SHARDS; i++) {
        struct shard *sh = &db->shards[i];
        usched_mutex_lock(&sh->lock);
        for (size_t b = 0; b < sh->nbuckets; b++) {
            size_t n = 0;
            for (struct entry *e = sh->buckets[b]; e; e = e->next) n++;
            if (n > longest) longest = n;
        }
        usched_mutex_unlock(&sh->lock);
    }
    return longest;
}

static struct shard *shard_of(struct rdb *db, uint64_t h)
{
    return &db->shards[h & (RDB_SHARDS - 1)];
}

/* The entry for key in sh (locked), or NULL. */
static struct entry **find(struct shard *sh, uint64_t h, const char *k, size_t n)
{
    if (!sh->nbuckets) return NULL;
    struct entry **pp = &sh->buckets[(h >> 6) & (sh->nbuckets - 1)];
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->hash == h && (*pp)->key.n == n && !memcmp((*pp)->key.p, k, n)) return pp;
    return NULL;
}

/* The entry for key, created as type if missing; NULL when out of memory. */
static struct entry *find_or_add(struct shard *sh, uint64_t h, const char *k, size_t n, enum vtype type)
{
    struct entry **pp = find(sh, h, k, n);
    if (pp) return *pp;
    if (sh->count >= sh->nbuckets) { /* load factor 1: double */
        size_t nb = sh->nbuckets ? sh->nbuckets * 2 : 64;
        struct entry **b = usched__calloc(nb, sizeof *b);
        if (!b) return NULL;
        for (size_t i = 0; i < sh->nbuckets; i++)
            for (struct entry *e = sh->buckets[i], *next; e; e = next) {
                next = e->next;
                struct entry **slot = &b[(e->hash >> 6) & (nb - 1)];
                e->next = *slot;
                *slot = e;
            }
        free(sh->buckets);
        sh->buckets = b;
        sh->nbuckets = nb;
    }
    struct entry *e = usched__calloc(1, sizeof *e);
    if (!e || !blob_set(&e->key, k, n)) {
        free(e);
        return NULL;
    }
    e->hash = h;
    e->type = type;
    struct entry **slot = &sh->buckets[(h >> 6) & (sh->nbuckets - 1)];
    e->next = *slot;
    *slot = e;
    sh->count++;
    return e;
}

static void remove_entry(struct shard *sh, struct entry **pp)
{
    struct entry *e = *pp;
    *pp = e->next;
    entry_free(e);
    sh->count--;
}

static bool list_push(struct list *l, const char *p, size_t n, bool left)
{
    if (l->count == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        struct blob *it = usched__malloc(cap * sizeof *it);
        if (!it) return false;
        for (size_t i = 0; i < l->count; i++) it[i] = l->items[(l->head + i) % l->cap];
        free(l->items);
        l->items = it;
        l->cap = cap;
        l->head = 0;
    }
    struct blob b = {0};
    if (!blob_set(&b, p, n)) return false;
    if (left) {
        l->head = (l->head + l->cap - 1) % l->cap;
        l->items[l->head] = b;
    } else {
        l->items[(l->head + l->count) % l->cap] = b;
    }
    l->count++;
    return true;
}

static struct blob list_pop(struct list *l, bool left)
{
    size_t i = left ? l->head : (l->head + l->count - 1) % l->cap;
    struct blob b = l->items[i];
    if (left) l->head = (l->head + 1) % l->cap;
    l->count--;
    return b;
}

/* ---- commands ---------------------------------------------------------------------------- */

struct ctx {
    struct rdb *db;
    struct srv_conn *c;
    const struct resp_cmd *cmd;
    bool quit;
};

#define ARG(i) x->cmd->argv[i], x->cmd->len[i]

static const char wrongtype[] = "WRONGTYPE Operation against a key holding the wrong kind of value";

/* Locks the shard of argument i; returns it with *h set. */
static struct shard *lock_key(struct ctx *x, int i, uint64_t *h)
{
    *h = hash_bytes(x->db, ARG(i));
    struct shard *sh = shard_of(x->db, *h);
    usched_mutex_lock(&sh->lock);
    return sh;
}

static void oom(struct ctx *x)
{
    resp_put_error(x->c, "OOM command not allowed when used memory > 'maxmemory'");
}

static void cmd_ping(struct ctx *x)
{
    if (x->cmd->argc == 2)
        resp_put_bulk(x->c, ARG(1));
    else
        resp_put_simple(x->c, "PONG");
}

static void cmd_echo(struct ctx *x)
{
    resp_put_bulk(x->c, ARG(1));
}

static bool set_one(struct ctx *x, int k, int v)
{
    uint64_t h;
    struct shard *sh = lock_key(x, k, &h);
    struct entry **pp = find(sh, h, ARG(k));
    if (pp && (*pp)->type != V_STRING) remove_entry(sh, pp); /* SET overwrites any type */
    struct entry *e = find_or_add(sh, h, ARG(k), V_STRING);
    bool ok = e && blob_set(&e->str, ARG(v));
    usched_mutex_unlock(&sh->lock);
    return ok;
}

static void cmd_set(struct ctx *x)
{
    if (set_one(x, 1, 2))
        resp_put_simple(x->c, "OK");
    else
        oom(x);
}

static void cmd_mset(struct ctx *x)
{
    if (x->cmd->argc % 2 == 0) {
        resp_put_error(x->c, "ERR wrong number of arguments for 'mset' command");
        return;
    }
    for (int i = 1; i < x->cmd->argc; i += 2)
        if (!set_one(x, i, i + 1)) {
            oom(x);
            return;
        }
    resp_put_simple(x->c, "OK");
}

/* Appends GET's reply for argument i (nil for a list under MGET). */
static void get_one(struct ctx *x, int i, bool mget)
{
    uint64_t h;
    struct shard *sh = lock_key(x, i, &h);
    struct entry **pp = find(sh, h, ARG(i));
    if (!pp || ((*pp)->type != V_STRING && mget))
        resp_put_nil(x->c);
    else if ((*pp)->type != V_STRING)
        resp_put_error(x->c, wrongtype);
    else
        resp_put_bulk(x->c, (*pp)->str.p, (*pp)->str.n);
    usched_mutex_unlock(&sh->lock);
}

static void cmd_get(struct ctx *x)
{
    get_one(x, 1, false);
}

static void cmd_mget(struct ctx *x)
{
    resp_put_array(x->c, x->cmd->argc - 1);
    for (int i = 1; i < x->cmd->argc && srv_drain(x->c) == 0; i++) get_one(x, i, true);
}

static void incr_by(struct ctx *x, long long by)
{
    uint64_t h;
    struct shard *sh = lock_key(x, 1, &h);
    struct entry *e = find_or_add(sh, h, ARG(1), V_STRING);
    if (!e) {
        usched_mutex_unlock(&sh->lock);
        oom(x);
        return;
    }
    if (e->type != V_STRING) {
        usched_mutex_unlock(&sh->lock);
        resp_put_error(x->c, wrongtype);
        return;
    }
    char buf[32];
    long long v = 0;
    bool ok = true;
    if (e->str.p) { /* an existing value must be a decimal integer */
        ok = e->str.n > 0 && e->str.n < sizeof buf;
        if (ok) {
            memcpy(buf, e->str.p, e->str.n);
            buf[e->str.n] = '\0';
            char *end;
            errno = 0;
            v = strtoll(buf, &end, 10);
            ok = *end == '\0' && errno == 0 && buf[0] != ' ' && buf[0] != '+';
        }
    }
    if (!ok) {
        usched_mutex_unlock(&sh->lock);
        resp_put_error(x->c, "ERR value is not an integer or out of range");
        return;
    }
    if ((by > 0 && v > LLONG_MAX - by) || (by < 0 && v < LLONG_MIN - by)) {
        usched_mutex_unlock(&sh->lock);
        resp_put_error(x->c, "ERR increment or decrement would overflow");
        return;
    }
    v += by;
    int n = snprintf(buf, sizeof buf, "%lld", v);
    ok = blob_set(&e->str, buf, (size_t)n);
    usched_mutex_unlock(&sh->lock);
    if (ok)
        resp_put_int(x->c, v);
    else
        oom(x);
}

static void cmd_incr(struct ctx *x)
{
    incr_by(x, 1);
}

static void cmd_decr(struct ctx *x)
{
    incr_by(x, -1);
}

/* DEL (remove) and EXISTS: the count of keys found. */
static void count_keys(struct ctx *x, bool remove)
{
    long long n = 0;
    for (int i = 1; i < x->cmd->argc; i++) {
        uint64_t h;
        struct shard *sh = lock_key(x, i, &h);
        struct entry **pp = find(sh, h, ARG(i));
        if (pp) {
            n++;
            if (remove) remove_entry(sh, pp);
        }
        usched_mutex_unlock(&sh->lock);
    }
    resp_put_int(x->c, n);
}

static void cmd_del(struct ctx *x)
{
    count_keys(x, true);
}

static void cmd_exists(struct ctx *x)
{
    count_keys(x, false);
}

static void push(struct ctx *x, bool left)
{
    uint64_t h;
    struct shard *sh = lock_key(x, 1, &h);
    struct entry *e = find_or_add(sh, h, ARG(1), V_LIST);
    long long len = -1;
    if (e && e->type == V_LIST) {
        int i;
        for (i = 2; i < x->cmd->argc; i++)
            if (!list_push(&e->list, ARG(i), left)) break;
        len = i == x->cmd->argc ? (long long)e->list.count : -2;
    }
    usched_mutex_unlock(&sh->lock);
    if (len >= 0)
        resp_put_int(x->c, len);
    else if (len == -1 && e)
        resp_put_error(x->c, wrongtype);
    else
        oom(x);
}

static void cmd_lpush(struct ctx *x)
{
    push(x, true);
}

static void cmd_rpush(struct ctx *x)
{
    push(x, false);
}

static void pop(struct ctx *x, bool left)
{
    long long count = 1;
    bool many = x->cmd->argc == 3;
    if (many) {
        char buf[24];
        char *end;
        size_t n = x->cmd->len[2];
        if (n == 0 || n >= sizeof buf) count = -1;
        if (count >= 0) {
            memcpy(buf, x->cmd->argv[2], n);
            buf[n] = '\0';
            count = strtoll(buf, &end, 10);
            if (*end) count = -1;
        }
        if (count < 0) {
            resp_put_error(x->c, "ERR value is out of range, must be positive");
            return;
        }
    }
    uint64_t h;
    struct shard *sh = lock_key(x, 1, &h);
    struct entry **pp = find(sh, h, ARG(1));
    if (!pp) {
        usched_mutex_unlock(&sh->lock);
        if (many)
            srv_puts(x->c, "*-1\r\n");
        else
            resp_put_nil(x->c);
        return;
    }
    struct entry *e = *pp;
    if (e->type != V_LIST) {
        usched_mutex_unlock(&sh->lock);
        resp_put_error(x->c, wrongtype);
        return;
    }
    if (count > (long long)e->list.count) count = (long long)e->list.count;
    /* the values leave the list under the lock (as one step, as in redis)
     * and are sent after it, so a long reply can drain to the peer without
     * holding the shard */
    struct blob one, *vals = count > 1 ? usched__malloc((size_t)count * sizeof *vals) : &one;
    if (!vals) {
        usched_mutex_unlock(&sh->lock);
        oom(x);
        return;
    }
    for (long long i = 0; i < count; i++) vals[i] = list_pop(&e->list, left);
    if (e->list.count == 0) remove_entry(sh, pp); /* an empty list is no key */
    usched_mutex_unlock(&sh->lock);
    if (many) resp_put_array(x->c, count);
    for (long long i = 0; i < count; i++) {
        srv_drain(x->c);
        resp_put_bulk(x->c, vals[i].p, vals[i].n);
        free(vals[i].p);
    }
    if (vals != &one) free(vals);
}

static void cmd_lpop(struct ctx *x)
{
    pop(x, true);
}

static void cmd_rpop(struct ctx *x)
{
    pop(x, false);
}

static void cmd_llen(struct ctx *x)
{
    uint64_t h;
    struct shard *sh = lock_key(x, 1, &h);
    struct entry **pp = find(sh, h, ARG(1));
    long long n = pp && (*pp)->type == V_LIST ? (long long)(*pp)->list.count : 0;
    bool wrong = pp && (*pp)->type != V_LIST;
    usched_mutex_unlock(&sh->lock);
    if (wrong)
        resp_put_error(x->c, wrongtype);
    else
        resp_put_int(x->c, n);
}

static bool arg_is(const struct ctx *x, int i, const char *s)
{
    return x->cmd->len[i] == strlen(s) && !strncasecmp(x->cmd->argv[i], s, x->cmd->len[i]);
}

static void cmd_config(struct ctx *x)
{
    /* redis-benchmark reads save and appendonly at start-up */
    static const char *const params[][2] = {{"save", ""}, {"appendonly", "no"}};
    if (!arg_is(x, 1, "get") || x->cmd->argc != 3) {
        resp_put_error(x->c, "ERR CONFIG: only CONFIG GET <parameter> is supported");
        return;
    }
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++)
        if (arg_is(x, 2, params[i][0])) {
            resp_put_array(x->c, 2);
            resp_put_bulk(x->c, params[i][0], strlen(params[i][0]));
            resp_put_bulk(x->c, params[i][1], strlen(params[i][1]));
            return;
        }
    resp_put_array(x->c, 0);
}

static void cmd_command(struct ctx *x)
{
    resp_put_array(x->c, 0); /* redis-cli asks for command docs; it copes with none */
}

static void cmd_select(struct ctx *x)
{
    if (arg_is(x, 1, "0"))
        resp_put_simple(x->c, "OK");
    else
        resp_put_error(x->c, "ERR DB index is out of range");
}

static void cmd_dbsize(struct ctx *x)
{
    long long n = 0;
    for (int i = 0; i < RDB_SHARDS; i++) {
        usched_mutex_lock(&x->db->shards[i].lock);
        n += (long long)x->db->shards[i].count;
        usched_mutex_unlock(&x->db->shards[i].lock);
    }
    resp_put_int(x->c, n);
}

static void cmd_flushall(struct ctx *x)
{
    for (int i = 0; i < RDB_SHARDS; i++) {
        usched_mutex_lock(&x->db->shards[i].lock);
        shard_clear(&x->db->shards[i]);
        usched_mutex_unlock(&x->db->shards[i].lock);
    }
    resp_put_simple(x->c, "OK");
}

static void cmd_quit(struct ctx *x)
{
    resp_put_simple(x->c, "OK");
    x->quit = true;
}

/* name, arity (as redis: n exactly n arguments with the name, -n at least n) */
#define REDIS_COMMANDS(X)                                                                 \
    X(ping, -1) X(echo, 2) X(set, 3) X(get, 2) X(incr, 2) X(decr, 2) X(del, -2)             \
    X(exists, -2) X(mset, -3) X(mget, -2) X(lpush, -3) X(rpush, -3) X(lpop, -2) X(rpop, -2) \
    X(llen, 2) X(config, -2) X(command, -1) X(select, 2) X(dbsize, 1) X(flushall, -1)       \
    X(quit, 1)

static const struct {
    const char *name;
    int arity;
    void (*fn)(struct ctx *x);
} commands[] = {
#define X(name, arity) {#name, arity, cmd_##name},
    REDIS_COMMANDS(X)
#undef X
};

static void execute(struct ctx *x)
{
    const struct resp_cmd *cmd = x->cmd;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (!arg_is(x, 0, commands[i].name)) continue;
        int a = commands[i].arity;
        bool lpop_count = (commands[i].fn == cmd_lpop || commands[i].fn == cmd_rpop) && cmd->argc > 3;
        bool ping_msg = commands[i].fn == cmd_ping && cmd->argc > 2;
        if ((a > 0 && cmd->argc != a) || (a < 0 && cmd->argc < -a) || lpop_count || ping_msg) {
            resp_put_error(x->c, "ERR wrong number of arguments for '%s' command", commands[i].name);
            return;
        }
        commands[i].fn(x);
        return;
    }
    int n = cmd->len[0] > 64 ? 64 : (int)cmd->len[0];
    resp_put_error(x->c, "ERR unknown command '%.*s'", n, cmd->argv[0]);
}

/* A connection's state: the keyspace and room for one parsed command
 * (16 KiB, so not on the fiber's stack). */
struct rconn {
    struct rdb *db;
    struct resp_cmd cmd;
};

static ssize_t redis_step(void *st, struct srv_conn *c, const char *in, size_t n)
{
    struct rconn *rc = st;
    const char *why;
    ssize_t k = resp_parse(in, n, &rc->cmd, &why);
    if (k < 0) resp_put_error(c, "ERR %s", why);
    if (k > 0 && rc->cmd.argc > 0) {
        struct ctx x = {.db = rc->db, .c = c, .cmd = &rc->cmd};
        execute(&x);
        c->requests++;
        if (x.quit) k = -ECONNRESET;
    }
    return k;
}

/* Over max_conns: redis's own refusal, whatever the client sent. */
static ssize_t redis_refuse(void *st, struct srv_conn *c, const char *in, size_t n)
{
    (void)st, (void)in, (void)n;
    resp_put_error(c, "ERR max number of clients reached");
    return -EBUSY;
}

ssize_t redis_feed(struct rdb *db, struct srv_conn *c, const void *in, size_t n)
{
    struct rconn *rc = usched__malloc(sizeof *rc);
    if (!rc) return -ENOMEM;
    rc->db = db;
    ssize_t r = srv_conn_feed(c, redis_step, rc, in, n);
    free(rc);
    return r;
}

static int redis_init(const struct srv_opts *o, void **state, char *err, size_t len)
{
    (void)o;
    if (rdb_create((struct rdb **)state) == 0) return 0;
    snprintf(err, len, "out of memory for the keyspace");
    return -1;
}

static void redis_conn(void *state, struct srv_conn *c)
{
    struct rconn *rc = usched__malloc(sizeof *rc);
    if (!rc) {
        c->out_failed = true; /* counted as a connection ended for lack of memory */
        return;
    }
    rc->db = state;
    srv_conn_run(c, redis_step, rc);
    free(rc);
}

static void redis_fini(void *state)
{
    rdb_free(state);
}

const struct srv_proto srv_proto_redis = {
    .name = "redis",
    .default_port = 6379,
    .summary = "RESP2 with pipelining over an in-memory keyspace",
    .in_max = RDB_MAX_REQUEST,
    .refuse = redis_refuse,
    .init = redis_init,
    .conn = redis_conn,
    .fini = redis_fini,
};
