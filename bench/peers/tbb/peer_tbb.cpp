// Peer: oneTBB task_group (bench/WORKLOADS.md): fib, spawn, skynet.
// Runs inside a task_arena of --threads slots, under a global_control of the
// same size, so TBB creates no more workers than asked.
#include "../common/peer.h"

#include <atomic>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

static struct peer_opts opts;

static long fib(int n)
{
	if (n < opts.cutoff)
		return peer_fib_serial(n);
	long x = 0;
	tbb::task_group g;
	g.run([&] { x = fib(n - 1); });
	long y = fib(n - 2);
	g.wait();
	return x + y;
}

static long long skynet(long long num, long long size)
{
	if (size == 1)
		return num;
	long long r[10];
	long long sub = size / 10;
	tbb::task_group g;
	for (int i = 0; i < 10; i++)
		g.run([&r, i, num, sub] { r[i] = skynet(num + i * sub, sub); });
	g.wait();
	long long sum = 0;
	for (long long v : r)
		sum += v;
	return sum;
}

static int run_fib(void)
{
	double t0 = peer_now();
	long v = fib((int)opts.n);
	double t = peer_now() - t0;
	fprintf(stderr, "fib(%ld) = %ld, cutoff %d\n", opts.n, v, opts.cutoff);
	return peer_result(&opts, t * 1e3, v == peer_fib_expected((int)opts.n));
}

static int run_spawn(void)
{
	double t0 = peer_now();
	long done = 0;
	std::atomic<long> ran{0};
	while (done < opts.n && !(done && peer_capped(&opts, t0))) {
		long batch = opts.n - done < PEER_SPAWN_BATCH ? opts.n - done : PEER_SPAWN_BATCH;
		tbb::task_group g;
		for (long i = 0; i < batch; i++)
			g.run([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
		g.wait();
		done += batch;
	}
	double t = peer_now() - t0;
	fprintf(stderr, "spawn: %ld tasks in %.3f s\n", done, t);
	return peer_result(&opts, t * 1e9 / (double)done,
			   peer_count_ok(&opts, "spawn: tasks that ran", ran.load(), done));
}

static int run_skynet(void)
{
	double t0 = peer_now();
	long long sum = skynet(0, opts.n);
	double t = peer_now() - t0;
	fprintf(stderr, "skynet: %ld leaves, sum %lld\n", opts.n, sum);
	return peer_result(&opts, t * 1e3, sum == peer_skynet_expected(opts.n));
}

int main(int argc, char **argv)
{
	peer_parse(argc, argv, "tbb", PEER_BIT(fib) | PEER_BIT(spawn) | PEER_BIT(skynet), &opts);
	tbb::global_control gc(tbb::global_control::max_allowed_parallelism, (size_t)opts.threads);
	tbb::task_arena arena(opts.threads);
	int rc = 0;
	arena.execute([&] {
		switch (opts.w) {
		case PEER_fib:    rc = run_fib(); break;
		case PEER_spawn:  rc = run_spawn(); break;
		case PEER_skynet: rc = run_skynet(); break;
		default:          rc = 3; break;
		}
	});
	return rc;
}
