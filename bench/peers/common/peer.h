/* Shared protocol of the C and C++ benchmark peers (see bench/WORKLOADS.md).
 *
 * Header-only, C11 and C++17: the command line, the RESULT line, the clock, and
 * the deterministic generators (mix64, xorshift64, the select table, the build
 * DAG and its work loop) that every implementation of a workload must share
 * bit for bit. The Go and Rust peers carry the same definitions in their own
 * language; bench/WORKLOADS.md is the reference for all of them.
 */
#ifndef USCHED_BENCH_PEER_H
#define USCHED_BENCH_PEER_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* name, unit, higher_is_better, default --n (0: the workload has no --n) */
#define PEER_WORKLOADS(X)                       \
	X(pingpong, "ns/rt", 0, 1000000)        \
	X(spawn,    "ns/op", 0, 1000000)        \
	X(skynet,   "ms",    0, 1000000)        \
	X(fib,      "ms",    0, 40)             \
	X(pairs,    "rt/s",  1, 0)              \
	X(select,   "tps",   1, 0)              \
	X(build,    "ms",    0, 2000)           \
	X(yield,    "ns/op", 0, 1000000)        \
	X(echo,     "ns/rt", 0, 100000)         \
	X(echo100,  "msg/s", 1, 0)

enum peer_workload {
#define PEER_ENUM(name, unit, hib, n) PEER_##name,
	PEER_WORKLOADS(PEER_ENUM)
#undef PEER_ENUM
	PEER_NWORKLOADS
};

#define PEER_BIT(name) (1u << PEER_##name)

struct peer_workload_info {
	const char *name;
	const char *unit;
	int higher_is_better;
	long default_n;
};

static const struct peer_workload_info peer_workload_infos[PEER_NWORKLOADS] = {
#define PEER_INFO(name, unit, hib, n) { #name, unit, hib, n },
	PEER_WORKLOADS(PEER_INFO)
#undef PEER_INFO
};

/* Defaults that are not a workload's --n (bench/WORKLOADS.md, "Common"). */
#define PEER_FIB_CUTOFF 12
#define PEER_DURATION_S 2.0
#define PEER_SEED 1
#define PEER_SPAWN_BATCH 1000
#define PEER_CHECK_EVERY 1000 /* pingpong: round trips between clock checks */
#define PEER_SELECT_ROWS 100000
#define PEER_BUILD_ITERS 8192 /* work-loop iterations per unit */
#define PEER_BUILD_CHECKSUM_2000_1 UINT64_C(0x36bd8d2f452f09db) /* recorded in bench/WORKLOADS.md */

struct peer_opts {
	enum peer_workload w;
	const char *system;
	int threads;      /* --threads, default: CPUs this process may use */
	long n;           /* --n, default per workload */
	double duration;  /* --duration seconds */
	int have_n;       /* --n was given */
	int have_duration;/* --duration was given */
	int clients;      /* select: --clients, default 2 x threads */
	int servers;      /* select: --servers, default threads */
	int pairs;        /* pairs: --pairs, default threads */
	int cutoff;       /* fib: --cutoff */
	uint64_t seed;    /* --seed */
};

static inline int peer_cpus(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	return 1;
}

static inline void peer_usage(const char *system, unsigned supported)
{
	fprintf(stderr, "usage: peer-%s <workload> [--threads N] [--n N] [--duration S] "
		"[--clients N] [--servers N] [--pairs N] [--seed N] [--cutoff N]\n"
		"workloads of this peer:", system);
	for (int i = 0; i < PEER_NWORKLOADS; i++)
		if (supported & (1u << i))
			fprintf(stderr, " %s", peer_workload_infos[i].name);
	fprintf(stderr, "\n");
}

static inline void peer_bad(const char *system, unsigned supported, const char *what,
			    const char *val, const char *why)
{
	fprintf(stderr, "peer-%s: bad argument %s '%s': %s\n", system, what, val ? val : "", why);
	peer_usage(system, supported);
	exit(2);
}

/* Parses an integer in [min, max] or exits 2 naming the option. */
static inline long long peer_int(const char *system, unsigned supported, const char *opt,
				 const char *s, long long min, long long max)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (s[0] == '\0' || *end != '\0' || errno == ERANGE)
		peer_bad(system, supported, opt, s, "not an integer");
	if (v < min || v > max) {
		char why[96];
		snprintf(why, sizeof(why), "must be in [%lld, %lld]", min, max);
		peer_bad(system, supported, opt, s, why);
	}
	return v;
}

/* Parses argv into *o. Exits 2 on a bad argument, 3 (printing
 * "unsupported workload X" on stdout) on a workload this peer lacks. */
static inline void peer_parse(int argc, char **argv, const char *system, unsigned supported,
			      struct peer_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->system = system;
	if (argc < 2 || argv[1][0] == '-') {
		if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
			peer_usage(system, supported);
			exit(0);
		}
		peer_bad(system, supported, "<workload>", argc < 2 ? "" : argv[1], "missing workload");
	}
	int w = -1;
	for (int i = 0; i < PEER_NWORKLOADS; i++)
		if (!strcmp(argv[1], peer_workload_infos[i].name))
			w = i;
	if (w < 0)
		peer_bad(system, supported, "<workload>", argv[1], "unknown workload");
	if (!(supported & (1u << w))) {
		printf("unsupported workload %s\n", argv[1]);
		exit(3);
	}
	o->w = (enum peer_workload)w;
	o->threads = peer_cpus();
	o->n = peer_workload_infos[w].default_n;
	o->duration = PEER_DURATION_S;
	o->cutoff = PEER_FIB_CUTOFF;
	o->seed = PEER_SEED;
	int clients = 0, servers = 0, pairs = 0;
	for (int i = 2; i < argc; i++) {
		char name[32];
		const char *val;
		const char *eq = strchr(argv[i], '=');
		if (strncmp(argv[i], "--", 2) != 0)
			peer_bad(system, supported, "option", argv[i], "expected --name");
		if (eq) {
			size_t len = (size_t)(eq - argv[i]);
			if (len >= sizeof(name))
				peer_bad(system, supported, "option", argv[i], "unknown option");
			memcpy(name, argv[i], len);
			name[len] = '\0';
			val = eq + 1;
		} else {
			snprintf(name, sizeof(name), "%s", argv[i]);
			if (i + 1 >= argc)
				peer_bad(system, supported, argv[i], "", "missing value");
			val = argv[++i];
		}
		if (!strcmp(name, "--threads"))
			o->threads = (int)peer_int(system, supported, name, val, 1, 4096);
		else if (!strcmp(name, "--n")) {
			o->n = (long)peer_int(system, supported, name, val, 1, LONG_MAX / 2);
			o->have_n = 1;
		} else if (!strcmp(name, "--duration")) {
			char *end;
			errno = 0;
			o->duration = strtod(val, &end);
			if (val[0] == '\0' || *end != '\0' || errno == ERANGE ||
			    !(o->duration > 0 && o->duration <= 86400))
				peer_bad(system, supported, name, val, "must be seconds in (0, 86400]");
			o->have_duration = 1;
		} else if (!strcmp(name, "--clients"))
			clients = (int)peer_int(system, supported, name, val, 1, 100000);
		else if (!strcmp(name, "--servers"))
			servers = (int)peer_int(system, supported, name, val, 1, 100000);
		else if (!strcmp(name, "--pairs"))
			pairs = (int)peer_int(system, supported, name, val, 1, 100000);
		else if (!strcmp(name, "--seed"))
			o->seed = (uint64_t)peer_int(system, supported, name, val, 0, LLONG_MAX);
		else if (!strcmp(name, "--cutoff"))
			o->cutoff = (int)peer_int(system, supported, name, val, 2, 60);
		else
			peer_bad(system, supported, "option", name, "unknown option");
	}
	o->clients = clients ? clients : 2 * o->threads;
	o->servers = servers ? servers : o->threads;
	o->pairs = pairs ? pairs : o->threads;
	char nval[32];
	snprintf(nval, sizeof(nval), "%ld", o->n);
	if (o->w == PEER_fib && o->n > 90)
		peer_bad(system, supported, "--n", nval, "fib(N) needs N <= 90");
	if (o->w == PEER_build && o->n > 10000000)
		peer_bad(system, supported, "--n", nval, "build needs at most 10000000 jobs");
	if (o->w == PEER_skynet) {
		long x = o->n;
		while (x > 1 && x % 10 == 0)
			x /= 10;
		if (x != 1 || o->n < 10)
			peer_bad(system, supported, "--n", nval, "skynet leaves must be a power of 10, >= 10");
	}
}

static inline double peer_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Whether the optional --duration cap has passed (pingpong, spawn). */
static inline int peer_capped(const struct peer_opts *o, double start)
{
	return o->have_duration && peer_now() - start >= o->duration;
}

/* Prints the RESULT line; returns the exit status (0, or 1 if the check failed). */
static inline int peer_result(const struct peer_opts *o, double value, int ok)
{
	const struct peer_workload_info *w = &peer_workload_infos[o->w];
	int threads = o->w == PEER_yield ? 1 : o->threads;
	printf("RESULT workload=%s system=%s value=%.*f unit=%s higher_is_better=%d check=%s threads=%d\n",
	       w->name, o->system, value >= 100 ? 0 : 2, value, w->unit, w->higher_is_better,
	       ok ? "ok" : "FAIL", threads);
	fflush(stdout);
	return ok ? 0 : 1;
}

/* The spawn and yield checks: a count the tasks kept themselves (spawn: bodies
 * that ran; yield: yields made, per task) against what the workload asked.
 * Prints a mismatch on stderr; returns 1 when they agree. */
static inline int peer_count_ok(const struct peer_opts *o, const char *what, long long got,
				long long want)
{
	if (got == want)
		return 1;
	fprintf(stderr, "peer-%s: %s: %lld, expected %lld\n", o->system, what, got, want);
	return 0;
}

static inline void peer_die(const struct peer_opts *o, const char *what, int err)
{
	fprintf(stderr, "peer-%s: %s: %s\n", o->system, what, strerror(err));
	exit(1);
}

/* ---- generators: bench/WORKLOADS.md, "Shared definitions" ------------------ */

static inline uint64_t peer_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

static inline uint64_t peer_xorshift_seed(uint64_t seed, uint64_t index)
{
	uint64_t s = peer_mix64(seed + UINT64_C(0x9E3779B97F4A7C15) * (index + 1));
	return s ? s : 1;
}

static inline uint64_t peer_xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static inline long peer_fib_serial(int n)
{
	return n < 2 ? n : peer_fib_serial(n - 1) + peer_fib_serial(n - 2);
}

static inline long peer_fib_expected(int n)
{
	long a = 0, b = 1;
	for (int i = 0; i < n; i++) {
		long t = a + b;
		a = b;
		b = t;
	}
	return a;
}

static inline long long peer_skynet_expected(long leaves)
{
	return (long long)leaves * (leaves - 1) / 2;
}

/* ---- select: the table ----------------------------------------------------- */

struct peer_row {
	uint64_t key;
	uint64_t payload[8];
};

static inline uint64_t peer_select_sum(uint64_t key)
{
	uint64_t s = 0;
	for (uint64_t j = 0; j < 8; j++)
		s += peer_mix64(key + j + 1);
	return s;
}

static inline int peer_row_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct peer_row *)a)->key, y = ((const struct peer_row *)b)->key;
	return x < y ? -1 : x > y;
}

/* Builds the table sorted by key; NULL when out of memory. */
static inline struct peer_row *peer_select_table(void)
{
	struct peer_row *t = (struct peer_row *)malloc(sizeof(*t) * PEER_SELECT_ROWS);
	if (!t)
		return NULL;
	for (uint64_t i = 0; i < PEER_SELECT_ROWS; i++) {
		t[i].key = peer_mix64(i);
		for (uint64_t j = 0; j < 8; j++)
			t[i].payload[j] = peer_mix64(t[i].key + j + 1);
	}
	qsort(t, PEER_SELECT_ROWS, sizeof(*t), peer_row_cmp);
	return t;
}

/* The key a client looks up next. */
static inline uint64_t peer_select_key(uint64_t *rng)
{
	return peer_mix64(peer_xorshift(rng) % PEER_SELECT_ROWS);
}

/* Binary search; NULL if absent. */
static inline const struct peer_row *peer_select_find(const struct peer_row *t, uint64_t key)
{
	size_t lo = 0, hi = PEER_SELECT_ROWS;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t[mid].key < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < PEER_SELECT_ROWS && t[lo].key == key ? &t[lo] : NULL;
}

/* A client's check of the reply to its look-up of key. */
static inline int peer_select_ok(uint64_t key, const struct peer_row *reply)
{
	uint64_t s = 0;
	for (int j = 0; j < 8; j++)
		s += reply->payload[j];
	return reply->key == key && s == peer_select_sum(key);
}

/* ---- build: the DAG and the work loop ------------------------------------ */

struct peer_job {
	uint32_t units;
	uint32_t ndeps;
	uint32_t deps[3];
};

static inline uint64_t peer_lcg(uint64_t *s)
{
	*s = *s * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
	return *s >> 33;
}

/* Fills jobs[0..n-1] from seed. */
static inline void peer_build_dag(struct peer_job *jobs, long n, uint64_t seed)
{
	uint64_t s = seed;
	for (long i = 0; i < n; i++) {
		struct peer_job *j = &jobs[i];
		uint64_t nd = peer_lcg(&s) % 4;
		uint64_t window = i < 64 ? (uint64_t)i : 64;
		j->ndeps = 0;
		if ((uint64_t)i < nd)
			nd = (uint64_t)i;
		for (uint64_t d = 0; d < nd; d++) {
			uint32_t p = (uint32_t)(i - 1 - (long)(peer_lcg(&s) % window));
			int dup = 0;
			for (uint32_t k = 0; k < j->ndeps; k++)
				dup |= j->deps[k] == p;
			if (!dup)
				j->deps[j->ndeps++] = p;
		}
		uint64_t r = peer_lcg(&s) % 100;
		j->units = (uint32_t)(r < 95 ? 8 + peer_lcg(&s) % 8 : 400 + peer_lcg(&s) % 400);
	}
}

static inline uint64_t peer_build_work(uint64_t x, uint32_t units)
{
	uint64_t iters = (uint64_t)units * PEER_BUILD_ITERS;
	for (uint64_t k = 0; k < iters; k++) {
		x = x * UINT64_C(6364136223846793005) + k;
		x ^= x >> 29;
	}
	return x;
}

/* Job i's input: mix64(i) plus the results of its dependencies. */
static inline uint64_t peer_build_input(const struct peer_job *jobs, const uint64_t *results, long i)
{
	uint64_t in = peer_mix64((uint64_t)i);
	for (uint32_t d = 0; d < jobs[i].ndeps; d++)
		in += results[jobs[i].deps[d]];
	return in;
}

/* The checksum of a serial run, for checking a parallel one. */
static inline uint64_t peer_build_reference(const struct peer_job *jobs, long n)
{
	uint64_t *r = (uint64_t *)calloc((size_t)n, sizeof(*r));
	uint64_t sum = 0;
	if (!r)
		return 0;
	for (long i = 0; i < n; i++)
		sum += r[i] = peer_build_work(peer_build_input(jobs, r, i), jobs[i].units);
	free(r);
	return sum;
}

/* Successor lists (CSR): the jobs that depend on job i are
 * succ[start[i]] .. succ[start[i + 1] - 1], in increasing order. 0 or -ENOMEM. */
static inline int peer_build_succ(const struct peer_job *jobs, long n, uint32_t **start_out,
				  uint32_t **succ_out)
{
	uint32_t *start = (uint32_t *)calloc((size_t)n + 1, sizeof(*start));
	uint32_t *fill = (uint32_t *)calloc((size_t)n + 1, sizeof(*fill));
	uint32_t *succ = (uint32_t *)calloc((size_t)n * 3 + 1, sizeof(*succ));
	if (!start || !fill || !succ) {
		free(start);
		free(fill);
		free(succ);
		return -ENOMEM;
	}
	for (long i = 0; i < n; i++)
		for (uint32_t d = 0; d < jobs[i].ndeps; d++)
			start[jobs[i].deps[d] + 1]++;
	for (long i = 0; i < n; i++)
		start[i + 1] += start[i];
	for (long i = 0; i < n; i++)
		for (uint32_t d = 0; d < jobs[i].ndeps; d++) {
			uint32_t p = jobs[i].deps[d];
			succ[start[p] + fill[p]++] = (uint32_t)i;
		}
	free(fill);
	*start_out = start;
	*succ_out = succ;
	return 0;
}

/* Whether sum is the checksum of the build (n jobs, seed): the recorded value
 * for the defaults, else that of a serial reference run. */
static inline int peer_build_check(const struct peer_job *jobs, long n, uint64_t seed, uint64_t sum)
{
	if (n == 2000 && seed == PEER_SEED)
		return sum == PEER_BUILD_CHECKSUM_2000_1;
	return sum == peer_build_reference(jobs, n);
}

#endif
