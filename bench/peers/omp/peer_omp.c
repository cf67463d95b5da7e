/* Peer: OpenMP tasks (bench/WORKLOADS.md): fib, and spawn and skynet as
 * task/taskwait too. One parallel region of --threads threads; the tree is
 * started by a single thread and the team executes the tasks. */
#include "../common/peer.h"

#include <omp.h>

static struct peer_opts opts;

static long fib(int n)
{
	if (n < opts.cutoff)
		return peer_fib_serial(n);
	long x = 0, y;
#pragma omp task shared(x) firstprivate(n)
	x = fib(n - 1);
	y = fib(n - 2);
#pragma omp taskwait
	return x + y;
}

static long long skynet(long long num, long long size)
{
	if (size == 1)
		return num;
	long long r[10];
	long long sub = size / 10;
	for (int i = 0; i < 10; i++) {
#pragma omp task shared(r) firstprivate(i, num, sub)
		r[i] = skynet(num + i * sub, sub);
	}
#pragma omp taskwait
	long long sum = 0;
	for (int i = 0; i < 10; i++)
		sum += r[i];
	return sum;
}

static long spawn_ran; /* task bodies that ran (omp atomic) */

static void nothing(void)
{
#pragma omp atomic
	spawn_ran++;
}

static long spawn(double t0)
{
	long done = 0;
	while (done < opts.n && !(done && peer_capped(&opts, t0))) {
		long batch = opts.n - done < PEER_SPAWN_BATCH ? opts.n - done : PEER_SPAWN_BATCH;
		for (long i = 0; i < batch; i++) {
#pragma omp task
			nothing();
		}
#pragma omp taskwait
		done += batch;
	}
	return done;
}

int main(int argc, char **argv)
{
	peer_parse(argc, argv, "omp", PEER_BIT(fib) | PEER_BIT(spawn) | PEER_BIT(skynet), &opts);
	long long v = 0;
	double t0 = 0, t = 0;
#pragma omp parallel num_threads(opts.threads)
#pragma omp single
	{
		t0 = peer_now();
		switch (opts.w) {
		case PEER_fib:    v = fib((int)opts.n); break;
		case PEER_spawn:  v = spawn(t0); break;
		case PEER_skynet: v = skynet(0, opts.n); break;
		default:          break;
		}
		t = peer_now() - t0;
	}
	switch (opts.w) {
	case PEER_fib:
		fprintf(stderr, "fib(%ld) = %lld, cutoff %d\n", opts.n, v, opts.cutoff);
		return peer_result(&opts, t * 1e3, v == peer_fib_expected((int)opts.n));
	case PEER_spawn:
		fprintf(stderr, "spawn: %lld tasks in %.3f s\n", v, t);
		return peer_result(&opts, t * 1e9 / (double)v,
				   peer_count_ok(&opts, "spawn: tasks that ran", spawn_ran, v));
	case PEER_skynet:
		fprintf(stderr, "skynet: %ld leaves, sum %lld\n", opts.n, v);
		return peer_result(&opts, t * 1e3, v == peer_skynet_expected(opts.n));
	default:
		return 3;
	}
}
