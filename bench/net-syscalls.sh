#!/bin/bash
# Counts the system calls a server makes per request, with strace -c -f
# attached to the server process while a real client sends a known number of
# requests: usched's servers (usched serve), the Go peer (peer-goserve) and
# the real servers where the request count is known (redis-server, nginx).
# Server on CPU 0, client on CPU 1 (the split layout). strace slows every
# call, so compare the counts, not the times.
#
#   bench/net-syscalls.sh [-b USCHED] [-p PEERS_DIR] [-n REQUESTS] [PROTOCOL...]
#     PROTOCOL: redis pgbench http (default: all three)
#     -b the usched CLI (default build/usched), -p the peers (default build/peers)
#
# Needs strace, taskset, the clients (scripts/deps.sh test) and the servers
# (scripts/deps-peers.sh); a missing one is reported and skipped.
set -u

bin=build/usched
peers=build/peers
n=20000
while getopts b:p:n:h opt; do
	case $opt in
	b) bin=$OPTARG ;;
	p) peers=$OPTARG ;;
	n) n=$OPTARG ;;
	*) sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
protocols=${*:-redis pgbench http}
for tool in strace taskset; do
	command -v $tool >/dev/null 2>&1 || { echo "net-syscalls: $tool is missing (apt-get install strace util-linux)" >&2; exit 1; }
done
tmp=$(mktemp -d /tmp/usched-syscalls-XXXXXX)
server=
tracer=
cleanup() {
	[ -n "$tracer" ] && kill -INT "$tracer" 2>/dev/null
	[ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# free_port: a port nobody listens on now
free_port() {
	while :; do
		p=$((30000 + RANDOM % 30000))
		(exec 3<>/dev/tcp/127.0.0.1/"$p") 2>/dev/null || { echo "$p"; return; }
	done
}

# wait_port PORT: until it accepts (10 s at most)
wait_port() {
	i=0
	while [ $i -lt 200 ]; do
		(exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
		sleep 0.05
		i=$((i + 1))
	done
	return 1
}

# client PROTOCOL PORT: runs the client on CPU 1; prints the requests it made
client() {
	case $1 in
	redis)
		taskset -c 1 redis-benchmark -p "$2" -c 50 -n "$n" -P 1 -t get -q >/dev/null 2>&1 && echo "$n" ;;
	pgbench)
		per=$((n / 4))
		taskset -c 1 pgbench -n -S -c 4 -j 2 -t "$per" -h 127.0.0.1 -p "$2" -U usched bench >"$tmp/pg.out" 2>&1 &&
			sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$tmp/pg.out" ;;
	http)
		taskset -c 1 wrk -t 2 -c 50 -d 2s "http://127.0.0.1:$2/" >"$tmp/wrk.out" 2>&1 &&
			sed -n 's/^ *\([0-9]*\) requests in.*/\1/p' "$tmp/wrk.out" ;;
	esac
}

# measure NAME PROTOCOL PORT: strace on $server while the client runs
measure() {
	strace -f -c -o "$tmp/trace" -p "$server" 2>/dev/null &
	tracer=$!
	sleep 1
	reqs=$(client "$2" "$3")
	kill -INT "$tracer" 2>/dev/null
	wait "$tracer" 2>/dev/null
	tracer=
	kill "$server" 2>/dev/null
	wait "$server" 2>/dev/null
	server=
	calls=$(awk '$NF == "total" { print $4 }' "$tmp/trace") # % time, seconds, usecs/call, calls
	if [ -z "$reqs" ] || [ -z "$calls" ] || [ "$reqs" -eq 0 ]; then
		printf '%-10s %-13s failed (no request count or no trace)\n' "$2" "$1"
		return
	fi
	top=$(awk 'NR > 2 && $NF != "total" && $NF != "syscall" && $1 !~ /^-/ { print $4, $NF }' \
		"$tmp/trace" | sort -rn | head -4 | awk -v r="$reqs" '{ printf "%s %.2f, ", $2, $1 / r }')
	printf '%-10s %-13s %9d requests %9d calls %6.2f per request (%s)\n' "$2" "$1" "$reqs" "$calls" \
		"$(echo "$calls $reqs" | awk '{ print $1 / $2 }')" "${top%, }"
}

for proto in $protocols; do
	case $proto in redis) c=redis-benchmark ;; pgbench) c=pgbench ;; http) c=wrk ;;
	*) echo "net-syscalls: protocol '$proto': redis, pgbench or http" >&2; exit 2 ;; esac
	command -v $c >/dev/null 2>&1 || { printf '%-10s skipped: %s is not installed\n' "$proto" "$c"; continue; }

	taskset -c 0 "$bin" serve "$proto" --port 0 --cpus 0 --quiet >"$tmp/serve.out" 2>&1 &
	server=$!
	sleep 0.5
	port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$tmp/serve.out")
	if [ -n "$port" ] && wait_port "$port"; then measure usched "$proto" "$port"; else
		printf '%-10s %-13s failed to start: %s\n' "$proto" usched "$(cat "$tmp/serve.out")"; kill "$server"; server=; fi

	if [ -x "$peers/peer-goserve" ]; then
		port=$(free_port)
		taskset -c 0 "$peers/peer-goserve" "$proto" --port "$port" --threads 1 >/dev/null 2>&1 &
		server=$!
		if wait_port "$port"; then measure go "$proto" "$port"; else kill "$server"; server=; fi
	else
		printf '%-10s %-13s skipped: no %s/peer-goserve (bench/peers/build.sh)\n' "$proto" go "$peers"
	fi

	case $proto in
	redis)
		if command -v redis-server >/dev/null 2>&1; then
			port=$(free_port)
			taskset -c 0 redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
				--dir "$tmp" --logfile '' >/dev/null 2>&1 &
			server=$!
			if wait_port "$port"; then measure redis-server "$proto" "$port"; else kill "$server"; server=; fi
		else
			printf '%-10s %-13s skipped: not installed\n' "$proto" redis-server
		fi ;;
	http)
		if [ -x /usr/sbin/nginx ]; then
			port=$(free_port)
			cat >"$tmp/nginx.conf" <<CONF
daemon off; master_process off; worker_processes 1; pid $tmp/nginx.pid; error_log $tmp/error.log;
events { worker_connections 4096; }
http { access_log off; client_body_temp_path $tmp/b; proxy_temp_path $tmp/p; fastcgi_temp_path $tmp/f;
  uwsgi_temp_path $tmp/u; scgi_temp_path $tmp/s;
  server { listen 127.0.0.1:$port; location / { default_type text/plain; return 200 "Hello, World!\n"; } } }
CONF
			taskset -c 0 /usr/sbin/nginx -p "$tmp" -c "$tmp/nginx.conf" -e stderr >/dev/null 2>&1 &
			server=$!
			if wait_port "$port"; then measure nginx "$proto" "$port"; else kill "$server"; server=; fi
		else
			printf '%-10s %-13s skipped: not installed\n' "$proto" nginx
		fi ;;
	pgbench)
		printf '%-10s %-13s not measured: PostgreSQL runs a process per connection plus its own background work\n' \
			"$proto" postgres ;;
	esac
done
