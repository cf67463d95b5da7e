// Peer: Boost.Fiber with its work_stealing scheduler (bench/WORKLOADS.md):
// pingpong, pairs, skynet, and yield (round_robin on one thread).
// --threads N: the main thread and N-1 helper threads each install
// work_stealing(N) (idle threads spin, the library's default); the helpers'
// main fibers then sleep on a fiber condition variable until the run ends.
// A channel is buffered_channel(2), which holds one value: the smallest size.
#include "../common/peer.h"

#include <atomic>
#include <boost/fiber/all.hpp>
#include <chrono>
#include <thread>
#include <vector>

namespace fibers = boost::fibers;
using chan = fibers::buffered_channel<long long>;

static struct peer_opts opts;
static const size_t stack_size = 16 * 1024;

static fibers::fiber start(std::function<void()> fn, fibers::launch how = fibers::launch::post)
{
	return fibers::fiber(how, std::allocator_arg, fibers::fixedsize_stack(stack_size), std::move(fn));
}

// ---- pingpong, pairs -------------------------------------------------------

static void echo_server(chan &req, chan &rep)
{
	for (long long v; (v = req.value_pop()) >= 0;)
		rep.push(v + 1);
}

static bool round_trip(chan &req, chan &rep, long long i)
{
	req.push(i);
	return rep.value_pop() == i + 1;
}

static int run_pingpong(void)
{
	chan req(2), rep(2);
	fibers::fiber server = start([&] { echo_server(req, rep); });
	bool ok = true;
	double t0 = peer_now();
	long i;
	for (i = 0; i < opts.n; i++) {
		if (i % PEER_CHECK_EVERY == 0 && i && peer_capped(&opts, t0))
			break;
		ok &= round_trip(req, rep, i);
	}
	double t = peer_now() - t0;
	req.push(-1);
	server.join();
	fprintf(stderr, "pingpong: %ld round trips in %.3f s\n", i, t);
	return peer_result(&opts, t * 1e9 / (double)i, ok);
}

// Own cache lines: two pairs on two threads must not share one.
struct alignas(64) pair {
	chan req{2}, rep{2};
	long done = 0;
	bool ok = true;
};

static int run_pairs(void)
{
	std::vector<pair> ps(opts.pairs);
	std::vector<fibers::fiber> fs;
	std::atomic<bool> stop{false};
	double t0 = peer_now();
	for (pair &p : ps) {
		fs.push_back(start([&p] { echo_server(p.req, p.rep); }));
		fs.push_back(start([&p, &stop] {
			long long i = 0;
			bool ok = true;
			while (!stop.load(std::memory_order_relaxed))
				ok &= round_trip(p.req, p.rep, i++);
			p.ok = ok;
			p.done = i;
			p.req.push(-1);
		}));
	}
	boost::this_fiber::sleep_for(std::chrono::nanoseconds((long long)(opts.duration * 1e9)));
	stop = true;
	for (fibers::fiber &f : fs)
		f.join();
	double t = peer_now() - t0;
	long total = 0;
	bool ok = true;
	for (pair &p : ps) {
		total += p.done;
		ok &= p.ok;
	}
	fprintf(stderr, "pairs: %d pairs, %ld round trips in %.3f s\n", opts.pairs, total, t);
	return peer_result(&opts, (double)total / t, ok);
}

// ---- skynet: Boost.Fiber's own shape (detached children, a result channel) ---
// launch::dispatch runs a child at once, so the tree unfolds depth first; with
// launch::post it unfolds breadth first and holds every fiber of the tree
// alive at once (1M leaves: 30 s on one thread instead of about 1 s).

static void skynet(chan &out, long long num, long long size)
{
	if (size == 1) {
		out.push(num);
		return;
	}
	chan rc(16);
	long long sub = size / 10;
	for (int i = 0; i < 10; i++)
		start([&rc, i, num, sub] { skynet(rc, num + i * sub, sub); }, fibers::launch::dispatch)
			.detach();
	long long sum = 0;
	for (int i = 0; i < 10; i++)
		sum += rc.value_pop();
	out.push(sum);
}

static int run_skynet(void)
{
	chan out(2);
	double t0 = peer_now();
	start([&] { skynet(out, 0, opts.n); }).detach();
	long long sum = out.value_pop();
	double t = peer_now() - t0;
	fprintf(stderr, "skynet: %ld leaves, sum %lld\n", opts.n, sum);
	return peer_result(&opts, t * 1e3, sum == peer_skynet_expected(opts.n));
}

// ---- yield: two fibers on one thread ---------------------------------------

static int run_yield(void)
{
	fibers::use_scheduling_algorithm<fibers::algo::round_robin>();
	// Each fiber counts its yields and notes a thread other than this one
	// (round_robin keeps both on the calling thread).
	const std::thread::id home = std::this_thread::get_id();
	long count[2] = {0, 0};
	bool moved = false;
	auto loop = [&](int k) {
		for (long i = 0; i < opts.n; i++) {
			boost::this_fiber::yield();
			count[k]++;
		}
		moved |= std::this_thread::get_id() != home;
	};
	double t0 = peer_now();
	fibers::fiber a = start([&] { loop(0); }), b = start([&] { loop(1); });
	a.join();
	b.join();
	double t = peer_now() - t0;
	int ok = peer_count_ok(&opts, "yield: first fiber's yields", count[0], opts.n) &
		 peer_count_ok(&opts, "yield: second fiber's yields", count[1], opts.n);
	if (moved) {
		fprintf(stderr, "peer-boostfiber: yield: a fiber left the calling thread\n");
		ok = 0;
	}
	return peer_result(&opts, t * 1e9 / (2.0 * (double)opts.n), ok);
}

int main(int argc, char **argv)
{
	peer_parse(argc, argv, "boostfiber",
		   PEER_BIT(pingpong) | PEER_BIT(pairs) | PEER_BIT(skynet) | PEER_BIT(yield), &opts);
	if (opts.w == PEER_yield)
		return run_yield();

	uint32_t n = (uint32_t)opts.threads;
	fibers::mutex m;
	fibers::condition_variable cv;
	bool done = false;
	std::vector<std::thread> helpers;
	for (uint32_t i = 1; i < n; i++)
		helpers.emplace_back([&] {
			fibers::use_scheduling_algorithm<fibers::algo::work_stealing>(n);
			std::unique_lock<fibers::mutex> lk(m);
			cv.wait(lk, [&] { return done; });
		});
	fibers::use_scheduling_algorithm<fibers::algo::work_stealing>(n);

	int rc;
	switch (opts.w) {
	case PEER_pingpong: rc = run_pingpong(); break;
	case PEER_pairs:    rc = run_pairs(); break;
	case PEER_skynet:   rc = run_skynet(); break;
	default:            rc = 3; break;
	}
	{
		std::unique_lock<fibers::mutex> lk(m);
		done = true;
	}
	cv.notify_all();
	for (std::thread &t : helpers)
		t.join();
	return rc;
}
