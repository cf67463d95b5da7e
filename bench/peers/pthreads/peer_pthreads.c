/* Peer: OS threads on the kernel scheduler, with pthread mutexes and condition
 * variables (bench/WORKLOADS.md). Every task is a thread with a 64 KiB stack
 * (usched's default fiber stack); a channel is a one-slot mailbox or, for the
 * select request channel, a bounded ring, each under one mutex with two
 * condition variables. --threads N restricts the process to its first N CPUs.
 */
#include "../common/peer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define SUPPORTED (PEER_BIT(pingpong) | PEER_BIT(spawn) | PEER_BIT(pairs) | PEER_BIT(select) | \
		   PEER_BIT(build) | PEER_BIT(yield) | PEER_BIT(echo) | PEER_BIT(echo100))
#define STACK_SIZE (64 * 1024)

static struct peer_opts opts;
static pthread_attr_t attr;

static void start_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
	int err = pthread_create(t, &attr, fn, arg);
	if (err)
		peer_die(&opts, "pthread_create", err);
}

static void join_thread(pthread_t t)
{
	int err = pthread_join(t, NULL);
	if (err)
		peer_die(&opts, "pthread_join", err);
}

/* ---- one-slot mailbox ------------------------------------------------------ */

struct box {
	pthread_mutex_t m;
	pthread_cond_t put, took;
	bool full;
	int64_t v;
};

static void box_init(struct box *b)
{
	pthread_mutex_init(&b->m, NULL);
	pthread_cond_init(&b->put, NULL);
	pthread_cond_init(&b->took, NULL);
	b->full = false;
}

static void box_send(struct box *b, int64_t v)
{
	pthread_mutex_lock(&b->m);
	while (b->full)
		pthread_cond_wait(&b->took, &b->m);
	b->v = v;
	b->full = true;
	pthread_cond_signal(&b->put);
	pthread_mutex_unlock(&b->m);
}

static int64_t box_recv(struct box *b)
{
	pthread_mutex_lock(&b->m);
	while (!b->full)
		pthread_cond_wait(&b->put, &b->m);
	int64_t v = b->v;
	b->full = false;
	pthread_cond_signal(&b->took);
	pthread_mutex_unlock(&b->m);
	return v;
}

/* ---- pingpong, pairs: a client and its server over two mailboxes ----------- */

struct pair {
	struct box req, rep;
	long done;      /* round trips completed (client) */
	bool ok;
	pthread_t client, server;
};

static atomic_bool stop;

/* pairs, select: let the clients run for --duration seconds, then stop them. */
static void sleep_then_stop(void)
{
	struct timespec d = { (time_t)opts.duration,
			      (long)((opts.duration - (double)(time_t)opts.duration) * 1e9) };
	while (nanosleep(&d, &d) == -1 && errno == EINTR)
		;
	atomic_store(&stop, true);
}

static void *echo_server(void *arg)
{
	struct pair *p = arg;
	for (int64_t v; (v = box_recv(&p->req)) >= 0;)
		box_send(&p->rep, v + 1);
	return NULL;
}

/* One round trip; false if the reply is wrong. */
static bool round_trip(struct pair *p, int64_t i)
{
	box_send(&p->req, i);
	return box_recv(&p->rep) == i + 1;
}

static int run_pingpong(void)
{
	struct pair p = { .ok = true };
	box_init(&p.req);
	box_init(&p.rep);
	start_thread(&p.server, echo_server, &p);
	double t0 = peer_now();
	long i;
	for (i = 0; i < opts.n; i++) {
		if (i % PEER_CHECK_EVERY == 0 && i && peer_capped(&opts, t0))
			break;
		p.ok &= round_trip(&p, i);
	}
	double t = peer_now() - t0;
	box_send(&p.req, -1);
	join_thread(p.server);
	fprintf(stderr, "pingpong: %ld round trips in %.3f s\n", i, t);
	return peer_result(&opts, t * 1e9 / (double)i, p.ok);
}

static void *pair_client(void *arg)
{
	struct pair *p = arg;
	int64_t i = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed))
		p->ok &= round_trip(p, i++);
	p->done = i;
	box_send(&p->req, -1);
	return NULL;
}

static int run_pairs(void)
{
	struct pair *ps = calloc((size_t)opts.pairs, sizeof(*ps));
	if (!ps)
		peer_die(&opts, "pairs", ENOMEM);
	double t0 = peer_now();
	for (int i = 0; i < opts.pairs; i++) {
		ps[i].ok = true;
		box_init(&ps[i].req);
		box_init(&ps[i].rep);
		start_thread(&ps[i].server, echo_server, &ps[i]);
		start_thread(&ps[i].client, pair_client, &ps[i]);
	}
	sleep_then_stop();
	long total = 0;
	bool ok = true;
	for (int i = 0; i < opts.pairs; i++) {
		join_thread(ps[i].client);
		join_thread(ps[i].server);
		total += ps[i].done;
		ok &= ps[i].ok;
	}
	double t = peer_now() - t0;
	fprintf(stderr, "pairs: %d pairs, %ld round trips in %.3f s\n", opts.pairs, total, t);
	free(ps);
	return peer_result(&opts, (double)total / t, ok);
}

/* ---- spawn ------------------------------------------------------------------ */

static atomic_long spawn_ran; /* thread bodies that ran */

static void *empty(void *arg)
{
	atomic_fetch_add_explicit(&spawn_ran, 1, memory_order_relaxed);
	return arg;
}

static int run_spawn(void)
{
	pthread_t *ts = calloc(PEER_SPAWN_BATCH, sizeof(*ts));
	if (!ts)
		peer_die(&opts, "spawn", ENOMEM);
	double t0 = peer_now();
	long done = 0;
	while (done < opts.n && !(done && peer_capped(&opts, t0))) {
		long batch = opts.n - done < PEER_SPAWN_BATCH ? opts.n - done : PEER_SPAWN_BATCH;
		for (long i = 0; i < batch; i++)
			start_thread(&ts[i], empty, NULL);
		for (long i = 0; i < batch; i++)
			join_thread(ts[i]);
		done += batch;
	}
	double t = peer_now() - t0;
	free(ts);
	fprintf(stderr, "spawn: %ld threads in %.3f s\n", done, t);
	return peer_result(&opts, t * 1e9 / (double)done,
			   peer_count_ok(&opts, "spawn: threads that ran", atomic_load(&spawn_ran), done));
}

/* ---- select ----------------------------------------------------------------- */

struct client {
	struct box reply;      /* value unused: the row travels in .row */
	struct peer_row row;   /* written by a server before it signals .reply */
	long done;
	bool ok;
	int index;
	pthread_t t;
};

struct request {
	uint64_t key;
	struct client *c;      /* NULL: the server stops */
};

static struct {
	pthread_mutex_t m;
	pthread_cond_t nonempty, nonfull;
	struct request *ring;
	size_t cap, head, len;
} rq = { .m = PTHREAD_MUTEX_INITIALIZER, .nonempty = PTHREAD_COND_INITIALIZER,
	 .nonfull = PTHREAD_COND_INITIALIZER };

static const struct peer_row *table;

static void rq_send(struct request r)
{
	pthread_mutex_lock(&rq.m);
	while (rq.len == rq.cap)
		pthread_cond_wait(&rq.nonfull, &rq.m);
	rq.ring[(rq.head + rq.len++) % rq.cap] = r;
	pthread_cond_signal(&rq.nonempty);
	pthread_mutex_unlock(&rq.m);
}

static struct request rq_recv(void)
{
	pthread_mutex_lock(&rq.m);
	while (rq.len == 0)
		pthread_cond_wait(&rq.nonempty, &rq.m);
	struct request r = rq.ring[rq.head];
	rq.head = (rq.head + 1) % rq.cap;
	rq.len--;
	pthread_cond_signal(&rq.nonfull);
	pthread_mutex_unlock(&rq.m);
	return r;
}

static void *select_server(void *arg)
{
	(void)arg;
	for (struct request r; (r = rq_recv()).c;) {
		const struct peer_row *row = peer_select_find(table, r.key);
		if (row)
			r.c->row = *row;
		else
			memset(&r.c->row, 0, sizeof(r.c->row));
		box_send(&r.c->reply, 1);
	}
	return NULL;
}

static void *select_client(void *arg)
{
	struct client *c = arg;
	uint64_t rng = peer_xorshift_seed(opts.seed, (uint64_t)c->index);
	long i = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		uint64_t key = peer_select_key(&rng);
		rq_send((struct request){ key, c });
		box_recv(&c->reply);
		c->ok &= peer_select_ok(key, &c->row);
		i++;
	}
	c->done = i;
	return NULL;
}

static int run_select(void)
{
	struct peer_row *t = peer_select_table();
	struct client *cs = calloc((size_t)opts.clients, sizeof(*cs));
	pthread_t *ss = calloc((size_t)opts.servers, sizeof(*ss));
	rq.cap = (size_t)opts.clients;
	rq.ring = calloc(rq.cap, sizeof(*rq.ring));
	if (!t || !cs || !ss || !rq.ring)
		peer_die(&opts, "select", ENOMEM);
	table = t;
	double t0 = peer_now();
	for (int i = 0; i < opts.servers; i++)
		start_thread(&ss[i], select_server, NULL);
	for (int i = 0; i < opts.clients; i++) {
		cs[i].index = i;
		cs[i].ok = true;
		box_init(&cs[i].reply);
		start_thread(&cs[i].t, select_client, &cs[i]);
	}
	sleep_then_stop();
	long total = 0;
	bool ok = true;
	for (int i = 0; i < opts.clients; i++) {
		join_thread(cs[i].t);
		total += cs[i].done;
		ok &= cs[i].ok;
	}
	double el = peer_now() - t0;
	for (int i = 0; i < opts.servers; i++)
		rq_send((struct request){ 0, NULL });
	for (int i = 0; i < opts.servers; i++)
		join_thread(ss[i]);
	fprintf(stderr, "select: %d clients, %d servers, %ld transactions in %.3f s\n",
		opts.clients, opts.servers, total, el);
	free(t);
	free(cs);
	free(ss);
	free(rq.ring);
	return peer_result(&opts, (double)total / el, ok);
}

/* ---- build: a detached thread per ready job --------------------------------- */

static struct {
	struct peer_job *jobs;
	uint32_t *start, *succ;
	atomic_uint *pending;
	uint64_t *results;
	atomic_long left;
	pthread_mutex_t m;
	pthread_cond_t finished;
} b = { .m = PTHREAD_MUTEX_INITIALIZER, .finished = PTHREAD_COND_INITIALIZER };

static void *build_job(void *arg);

static void build_spawn(uint32_t i)
{
	pthread_t t;
	start_thread(&t, build_job, (void *)(uintptr_t)i);
	pthread_detach(t);
}

static void *build_job(void *arg)
{
	uint32_t i = (uint32_t)(uintptr_t)arg;
	/* the acquire of the last decrement of pending[i] made the inputs visible */
	b.results[i] = peer_build_work(peer_build_input(b.jobs, b.results, i), b.jobs[i].units);
	for (uint32_t k = b.start[i]; k < b.start[i + 1]; k++)
		if (atomic_fetch_sub_explicit(&b.pending[b.succ[k]], 1, memory_order_acq_rel) == 1)
			build_spawn(b.succ[k]);
	if (atomic_fetch_sub_explicit(&b.left, 1, memory_order_acq_rel) == 1) {
		pthread_mutex_lock(&b.m);
		pthread_cond_signal(&b.finished);
		pthread_mutex_unlock(&b.m);
	}
	return NULL;
}

static int run_build(void)
{
	long n = opts.n;
	b.jobs = calloc((size_t)n, sizeof(*b.jobs));
	b.pending = calloc((size_t)n, sizeof(*b.pending));
	b.results = calloc((size_t)n, sizeof(*b.results));
	if (!b.jobs || !b.pending || !b.results)
		peer_die(&opts, "build", ENOMEM);
	peer_build_dag(b.jobs, n, opts.seed);
	if (peer_build_succ(b.jobs, n, &b.start, &b.succ))
		peer_die(&opts, "build", ENOMEM);
	for (long i = 0; i < n; i++)
		atomic_init(&b.pending[i], b.jobs[i].ndeps);
	atomic_init(&b.left, n);
	double t0 = peer_now();
	pthread_mutex_lock(&b.m);
	for (long i = 0; i < n; i++)
		if (b.jobs[i].ndeps == 0)
			build_spawn((uint32_t)i);
	while (atomic_load(&b.left) > 0)
		pthread_cond_wait(&b.finished, &b.m);
	pthread_mutex_unlock(&b.m);
	double t = peer_now() - t0;
	uint64_t sum = 0;
	for (long i = 0; i < n; i++)
		sum += b.results[i];
	fprintf(stderr, "build: %ld jobs, checksum 0x%016llx\n", n, (unsigned long long)sum);
	int ok = peer_build_check(b.jobs, n, opts.seed, sum);
	return peer_result(&opts, t * 1e3, ok);
}

/* ---- yield: two threads pinned to one CPU ------------------------------------ */

static pthread_barrier_t yield_barrier;

struct yielder {
	int cpu;     /* the CPU both threads are pinned to */
	long count;  /* sched_yield calls that succeeded */
	bool moved;  /* ran on another CPU than the pinned one */
};

static void *yielder(void *arg)
{
	struct yielder *y = arg;
	pthread_barrier_wait(&yield_barrier);
	for (long i = 0; i < opts.n; i++)
		y->count += sched_yield() == 0;
	y->moved = sched_getcpu() != y->cpu;
	return NULL;
}

static int run_yield(void)
{
	cpu_set_t set, one;
	sched_getaffinity(0, sizeof(set), &set);
	CPU_ZERO(&one);
	int cpu = 0;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set)) {
			CPU_SET(c, &one);
			cpu = c;
			break;
		}
	pthread_attr_setaffinity_np(&attr, sizeof(one), &one);
	pthread_barrier_init(&yield_barrier, NULL, 3);
	pthread_t t[2];
	struct yielder y[2] = {{.cpu = cpu}, {.cpu = cpu}};
	start_thread(&t[0], yielder, &y[0]);
	start_thread(&t[1], yielder, &y[1]);
	pthread_barrier_wait(&yield_barrier);
	double t0 = peer_now();
	join_thread(t[0]);
	join_thread(t[1]);
	double el = peer_now() - t0;
	int ok = peer_count_ok(&opts, "yield: first thread's yields", y[0].count, opts.n) &
		 peer_count_ok(&opts, "yield: second thread's yields", y[1].count, opts.n);
	if (y[0].moved || y[1].moved) {
		fprintf(stderr, "peer-pthreads: yield: a thread left CPU %d\n", cpu);
		ok = 0;
	}
	return peer_result(&opts, el * 1e9 / (2.0 * (double)opts.n), ok);
}

/* ---------------------------------------------------------------------------- */

static void restrict_cpus(int n)
{
	cpu_set_t set, mine;
	sched_getaffinity(0, sizeof(set), &set);
	CPU_ZERO(&mine);
	for (int c = 0, k = 0; c < CPU_SETSIZE && k < n; c++)
		if (CPU_ISSET(c, &set)) {
			CPU_SET(c, &mine);
			k++;
		}
	if (CPU_COUNT(&mine) < n)
		fprintf(stderr, "peer-pthreads: %d threads asked, %d CPUs allowed: threads share CPUs\n",
			n, CPU_COUNT(&mine));
	else
		sched_setaffinity(0, sizeof(mine), &mine);
}

#include "peer_pthreads_echo.h" /* echo, echo100: a blocking thread per connection */

int main(int argc, char **argv)
{
	peer_parse(argc, argv, "pthreads", SUPPORTED, &opts);
	restrict_cpus(opts.threads);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, STACK_SIZE);
	switch (opts.w) {
	case PEER_pingpong: return run_pingpong();
	case PEER_spawn:    return run_spawn();
	case PEER_pairs:    return run_pairs();
	case PEER_select:   return run_select();
	case PEER_build:    return run_build();
	case PEER_yield:    return run_yield();
	case PEER_echo:     return run_echo();
	case PEER_echo100:  return run_echo100();
	default:            return 3;
	}
}
