/* The echo workloads on OS threads (bench/WORKLOADS.md): the C baseline of
 * one blocking thread per connection on each side - a server thread per
 * accepted connection and a client thread per connection, all with plain
 * blocking read/write, so each message costs the kernel's loopback path and
 * a thread wake-up, nothing more. Included by peer_pthreads.c. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/peer_echo.h"

static void echo_nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void *echo_serve(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[PEER_ECHO_BUF];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		for (ssize_t w = 0; w < n;) {
			ssize_t k = write(fd, buf + w, (size_t)(n - w));
			if (k <= 0)
				goto out;
			w += k;
		}
	}
out:
	close(fd);
	return NULL;
}

struct echo_srv {
	int lfd, nconn;
	struct sockaddr_in addr;
	pthread_t acceptor;
	pthread_t *servers;
};

static void *echo_accept(void *arg)
{
	struct echo_srv *s = arg;
	for (int i = 0; i < s->nconn; i++) {
		int c = accept(s->lfd, NULL, NULL);
		if (c < 0)
			peer_die(&opts, "echo: accept", errno);
		echo_nodelay(c);
		start_thread(&s->servers[i], echo_serve, (void *)(intptr_t)c);
	}
	return NULL;
}

static void echo_listen(struct echo_srv *s, int nconn)
{
	s->nconn = nconn;
	s->servers = calloc((size_t)nconn, sizeof(*s->servers));
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memset(&s->addr, 0, sizeof(s->addr));
	s->addr.sin_family = AF_INET;
	s->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t l = sizeof(s->addr);
	if (!s->servers || s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&s->addr, sizeof(s->addr)) < 0 ||
	    listen(s->lfd, 1024) < 0 || getsockname(s->lfd, (struct sockaddr *)&s->addr, &l) < 0)
		peer_die(&opts, "echo: listen on 127.0.0.1", errno ? errno : ENOMEM);
	start_thread(&s->acceptor, echo_accept, s);
}

static void echo_finish(struct echo_srv *s)
{
	join_thread(s->acceptor);
	for (int i = 0; i < s->nconn; i++)
		join_thread(s->servers[i]);
	close(s->lfd);
	free(s->servers);
}

static int echo_dial(const struct echo_srv *s)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (const struct sockaddr *)&s->addr, sizeof(s->addr)) < 0)
		peer_die(&opts, "echo: connect", errno);
	echo_nodelay(fd);
	return fd;
}

static bool echo_round_trip(int fd, long c, long i)
{
	uint8_t m[PEER_ECHO_MSG], back[PEER_ECHO_MSG];
	peer_echo_fill(m, c, i);
	if (write(fd, m, sizeof(m)) != (ssize_t)sizeof(m))
		return false;
	for (size_t got = 0; got < sizeof(back);) {
		ssize_t n = read(fd, back + got, sizeof(back) - got);
		if (n <= 0)
			return false;
		got += (size_t)n;
	}
	return peer_echo_check(back, c, i);
}

static int run_echo(void)
{
	struct echo_srv s;
	echo_listen(&s, 1);
	int fd = echo_dial(&s);
	bool ok = true;
	double t0 = peer_now();
	long i;
	for (i = 0; i < opts.n && ok; i++) {
		if (i % PEER_CHECK_EVERY == 0 && i && peer_capped(&opts, t0))
			break;
		ok = echo_round_trip(fd, 0, i);
	}
	double t = peer_now() - t0;
	close(fd);
	echo_finish(&s);
	fprintf(stderr, "echo: %ld round trips in %.3f s\n", i, t);
	return peer_result(&opts, t * 1e9 / (double)i, ok);
}

struct echo_client {
	int fd;
	long index, done;
	bool ok;
	atomic_bool *stop;
	pthread_t th;
};

static void *echo_client_main(void *arg)
{
	struct echo_client *c = arg;
	c->ok = true;
	while (c->ok && !atomic_load_explicit(c->stop, memory_order_relaxed))
		c->ok = echo_round_trip(c->fd, c->index, c->done++);
	return NULL;
}

static int run_echo100(void)
{
	struct echo_srv s;
	echo_listen(&s, PEER_ECHO_CONNS);
	struct echo_client cs[PEER_ECHO_CONNS];
	atomic_bool stop = false;
	for (int c = 0; c < PEER_ECHO_CONNS; c++)
		cs[c] = (struct echo_client){ .fd = echo_dial(&s), .index = c, .stop = &stop };
	double t0 = peer_now();
	for (int c = 0; c < PEER_ECHO_CONNS; c++)
		start_thread(&cs[c].th, echo_client_main, &cs[c]);
	struct timespec d = { (time_t)opts.duration,
			      (long)((opts.duration - (double)(time_t)opts.duration) * 1e9) };
	nanosleep(&d, NULL);
	atomic_store(&stop, true);
	long total = 0;
	bool ok = true;
	for (int c = 0; c < PEER_ECHO_CONNS; c++) {
		join_thread(cs[c].th);
		total += cs[c].done;
		ok = ok && cs[c].ok;
	}
	double t = peer_now() - t0;
	for (int c = 0; c < PEER_ECHO_CONNS; c++)
		close(cs[c].fd);
	echo_finish(&s);
	fprintf(stderr, "echo100: %ld round trips on %d connections in %.3f s\n", total, PEER_ECHO_CONNS, t);
	return peer_result(&opts, (double)total / t, ok);
}
