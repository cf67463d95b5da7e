// Peer: Go goroutines and channels (bench/WORKLOADS.md), all workloads.
// GOMAXPROCS = --threads (1 for yield). Channels are unbuffered (rendezvous)
// except where WORKLOADS.md says otherwise.
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/trace"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type workload struct {
	name           string
	unit           string
	higherIsBetter int
	defaultN       int64
}

// Same table as bench/peers/common/peer.h.
var workloads = []workload{
	{"pingpong", "ns/rt", 0, 1000000},
	{"spawn", "ns/op", 0, 1000000},
	{"skynet", "ms", 0, 1000000},
	{"fib", "ms", 0, 40},
	{"pairs", "rt/s", 1, 0},
	{"select", "tps", 1, 0},
	{"build", "ms", 0, 2000},
	{"yield", "ns/op", 0, 1000000},
	{"echo", "ns/rt", 0, 100000},
	{"echo100", "msg/s", 1, 0},
	{"preempt", "us", 0, 0}, // preempt.go; usched's own table: tools/usched/bench_preempt.c
}

const (
	fibCutoff       = 12
	defaultDuration = 2.0
	defaultSeed     = 1
	spawnBatch      = 1000
	checkEvery      = 1000
	selectRows      = 100000
	buildIters      = 8192
	buildChecksum   = uint64(0x36bd8d2f452f09db) // n=2000, seed=1
)

type options struct {
	w            workload
	threads      int
	n            int64
	duration     float64
	haveDuration bool
	clients      int
	servers      int
	pairs        int
	cutoff       int
	seed         uint64
	trace        string   // --trace: Go's execution trace of the run (go tool trace)
	traceFile    *os.File // open while tracing
}

var opts options

func usage() {
	fmt.Fprintln(os.Stderr, "usage: peer-go <workload> [--threads N] [--n N] [--duration S] "+
		"[--clients N] [--servers N] [--pairs N] [--seed N] [--cutoff N] [--trace FILE]")
	fmt.Fprintln(os.Stderr, "workloads of this peer: pingpong spawn skynet fib pairs select build yield echo echo100 preempt")
}

func bad(what, val, why string) {
	fmt.Fprintf(os.Stderr, "peer-go: bad argument %s '%s': %s\n", what, val, why)
	usage()
	os.Exit(2)
}

func parseInt(opt, s string, min, max int64) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		bad(opt, s, "not an integer")
	}
	if v < min || v > max {
		bad(opt, s, fmt.Sprintf("must be in [%d, %d]", min, max))
	}
	return v
}

func parse(args []string) {
	if len(args) < 1 || strings.HasPrefix(args[0], "-") {
		if len(args) >= 1 && (args[0] == "-h" || args[0] == "--help") {
			usage()
			os.Exit(0)
		}
		val := ""
		if len(args) >= 1 {
			val = args[0]
		}
		bad("<workload>", val, "missing workload")
	}
	found := false
	for _, w := range workloads {
		if w.name == args[0] {
			opts.w, found = w, true
		}
	}
	if !found {
		bad("<workload>", args[0], "unknown workload")
	}
	opts.threads = runtime.NumCPU()
	opts.n = opts.w.defaultN
	opts.duration = defaultDuration
	opts.cutoff = fibCutoff
	opts.seed = defaultSeed
	clients, servers, pairs := 0, 0, 0
	for i := 1; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") {
			bad("option", a, "expected --name")
		}
		name, val, hasEq := strings.Cut(a, "=")
		if !hasEq {
			if i+1 >= len(args) {
				bad(a, "", "missing value")
			}
			i++
			val = args[i]
		}
		switch name {
		case "--threads":
			opts.threads = int(parseInt(name, val, 1, 4096))
		case "--n":
			opts.n = parseInt(name, val, 1, 1<<62)
		case "--duration":
			d, err := strconv.ParseFloat(val, 64)
			if err != nil || !(d > 0 && d <= 86400) {
				bad(name, val, "must be seconds in (0, 86400]")
			}
			opts.duration, opts.haveDuration = d, true
		case "--clients":
			clients = int(parseInt(name, val, 1, 100000))
		case "--servers":
			servers = int(parseInt(name, val, 1, 100000))
		case "--pairs":
			pairs = int(parseInt(name, val, 1, 100000))
		case "--seed":
			opts.seed = uint64(parseInt(name, val, 0, 1<<63-1))
		case "--cutoff":
			opts.cutoff = int(parseInt(name, val, 2, 60))
		case "--trace":
			if val == "" {
				bad(name, val, "must be a file name")
			}
			opts.trace = val
		default:
			bad("option", name, "unknown option")
		}
	}
	opts.clients, opts.servers, opts.pairs = 2*opts.threads, opts.threads, opts.threads
	if clients > 0 {
		opts.clients = clients
	}
	if servers > 0 {
		opts.servers = servers
	}
	if pairs > 0 {
		opts.pairs = pairs
	}
	nval := strconv.FormatInt(opts.n, 10)
	switch opts.w.name {
	case "fib":
		if opts.n > 90 {
			bad("--n", nval, "fib(N) needs N <= 90")
		}
	case "build":
		if opts.n > 10000000 {
			bad("--n", nval, "build needs at most 10000000 jobs")
		}
	case "skynet":
		x := opts.n
		for x > 1 && x%10 == 0 {
			x /= 10
		}
		if x != 1 || opts.n < 10 {
			bad("--n", nval, "skynet leaves must be a power of 10, >= 10")
		}
	}
}

func result(value float64, ok bool) {
	traceStop()
	threads := opts.threads
	if opts.w.name == "yield" {
		threads = 1
	}
	prec := 2
	if value >= 100 {
		prec = 0
	}
	check := "ok"
	if !ok {
		check = "FAIL"
	}
	fmt.Printf("RESULT workload=%s system=go value=%.*f unit=%s higher_is_better=%d check=%s threads=%d\n",
		opts.w.name, prec, value, opts.w.unit, opts.w.higherIsBetter, check, threads)
	if !ok {
		os.Exit(1)
	}
}

// countOK is the spawn and yield check: a count the goroutines kept themselves
// against what the workload asked; a mismatch is reported on stderr.
func countOK(what string, got, want int64) bool {
	if got != want {
		fmt.Fprintf(os.Stderr, "peer-go: %s: %d, expected %d\n", what, got, want)
	}
	return got == want
}

func capped(start time.Time) bool {
	return opts.haveDuration && time.Since(start).Seconds() >= opts.duration
}

func sleepDuration() {
	time.Sleep(time.Duration(opts.duration * float64(time.Second)))
}

// ---- shared definitions (WORKLOADS.md) ----------------------------------------

func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

func xorshiftSeed(seed, index uint64) uint64 {
	s := mix64(seed + 0x9E3779B97F4A7C15*(index+1))
	if s == 0 {
		s = 1
	}
	return s
}

func xorshift(s *uint64) uint64 {
	x := *s
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	*s = x
	return x
}

// ---- pingpong, pairs ------------------------------------------------------------

func echoServer(req <-chan int64, rep chan<- int64) {
	for v := range req {
		rep <- v + 1
	}
}

func runPingpong() {
	req, rep := make(chan int64), make(chan int64)
	go echoServer(req, rep)
	ok := true
	start := time.Now()
	var i int64
	for i = 0; i < opts.n; i++ {
		if i%checkEvery == 0 && i > 0 && capped(start) {
			break
		}
		req <- i
		ok = ok && <-rep == i+1
	}
	el := time.Since(start)
	close(req)
	fmt.Fprintf(os.Stderr, "pingpong: %d round trips in %.3f s\n", i, el.Seconds())
	result(float64(el.Nanoseconds())/float64(i), ok)
}

// runClients runs n client goroutines until --duration has passed, then stops
// them; it returns their total count, the seconds since start when the last
// one ended, and whether every client was ok.
func runClients(start time.Time, n int, client func(c int, stop *atomic.Bool) (int64, bool)) (int64, float64, bool) {
	var stop atomic.Bool
	done := make([]int64, n)
	oks := make([]bool, n)
	var wg sync.WaitGroup
	for c := 0; c < n; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			done[c], oks[c] = client(c, &stop)
		}(c)
	}
	sleepDuration()
	stop.Store(true)
	wg.Wait()
	el := time.Since(start).Seconds()
	var total int64
	ok := true
	for c := range done {
		total += done[c]
		ok = ok && oks[c]
	}
	return total, el, ok
}

func runPairs() {
	start := time.Now()
	reqs := make([]chan int64, opts.pairs)
	reps := make([]chan int64, opts.pairs)
	for p := range reqs {
		reqs[p], reps[p] = make(chan int64), make(chan int64)
		go echoServer(reqs[p], reps[p])
	}
	total, el, ok := runClients(start, opts.pairs, func(p int, stop *atomic.Bool) (int64, bool) {
		ok := true
		var i int64
		for ; !stop.Load(); i++ {
			reqs[p] <- i
			ok = ok && <-reps[p] == i+1
		}
		close(reqs[p])
		return i, ok
	})
	fmt.Fprintf(os.Stderr, "pairs: %d pairs, %d round trips in %.3f s\n", opts.pairs, total, el)
	result(float64(total)/el, ok)
}

// ---- spawn, skynet, fib -----------------------------------------------------------

func runSpawn() {
	var wg sync.WaitGroup
	var ran atomic.Int64 // goroutine bodies that ran
	body := func() {
		ran.Add(1)
		wg.Done()
	}
	start := time.Now()
	var done int64
	for done < opts.n && !(done > 0 && capped(start)) {
		batch := opts.n - done
		if batch > spawnBatch {
			batch = spawnBatch
		}
		wg.Add(int(batch))
		for i := int64(0); i < batch; i++ {
			go body()
		}
		wg.Wait()
		done += batch
	}
	el := time.Since(start)
	fmt.Fprintf(os.Stderr, "spawn: %d goroutines in %.3f s\n", done, el.Seconds())
	result(float64(el.Nanoseconds())/float64(done), countOK("spawn: goroutines that ran", ran.Load(), done))
}

// The classic Go skynet: each inner task sums its children's answers from a channel.
func skynet(c chan<- int64, num, size int64) {
	if size == 1 {
		c <- num
		return
	}
	rc := make(chan int64, 10)
	var sum int64
	for i := int64(0); i < 10; i++ {
		sub := size / 10
		go skynet(rc, num+i*sub, sub)
	}
	for i := 0; i < 10; i++ {
		sum += <-rc
	}
	c <- sum
}

func runSkynet() {
	c := make(chan int64, 1)
	start := time.Now()
	go skynet(c, 0, opts.n)
	sum := <-c
	el := time.Since(start)
	fmt.Fprintf(os.Stderr, "skynet: %d leaves, sum %d\n", opts.n, sum)
	result(float64(el.Nanoseconds())/1e6, sum == opts.n*(opts.n-1)/2)
}

func fibSerial(n int) int64 {
	if n < 2 {
		return int64(n)
	}
	return fibSerial(n-1) + fibSerial(n-2)
}

func fibTask(n int) int64 {
	if n < opts.cutoff {
		return fibSerial(n)
	}
	c := make(chan int64, 1)
	go func() { c <- fibTask(n - 1) }()
	y := fibTask(n - 2)
	return <-c + y
}

func runFib() {
	n := int(opts.n)
	start := time.Now()
	v := fibTask(n)
	el := time.Since(start)
	a, b := int64(0), int64(1)
	for i := 0; i < n; i++ {
		a, b = b, a+b
	}
	fmt.Fprintf(os.Stderr, "fib(%d) = %d, cutoff %d\n", n, v, opts.cutoff)
	result(float64(el.Nanoseconds())/1e6, v == a)
}

// ---- select --------------------------------------------------------------------------

type row struct {
	key     uint64
	payload [8]uint64
}

type request struct {
	key   uint64
	reply chan row // the row by value: a channel of rows copies it into the channel's buffer
}

func selectTable() []row {
	t := make([]row, selectRows)
	for i := range t {
		t[i].key = mix64(uint64(i))
		for j := range t[i].payload {
			t[i].payload[j] = mix64(t[i].key + uint64(j) + 1)
		}
	}
	sort.Slice(t, func(a, b int) bool { return t[a].key < t[b].key })
	return t
}

func selectFind(t []row, key uint64) row {
	i := sort.Search(len(t), func(i int) bool { return t[i].key >= key })
	if i < len(t) && t[i].key == key {
		return t[i]
	}
	return row{}
}

func selectSum(key uint64) uint64 {
	var s uint64
	for j := uint64(0); j < 8; j++ {
		s += mix64(key + j + 1)
	}
	return s
}

func runSelect() {
	t := selectTable()
	reqs := make(chan request, opts.clients)
	var swg sync.WaitGroup
	start := time.Now()
	for s := 0; s < opts.servers; s++ {
		swg.Add(1)
		go func() {
			defer swg.Done()
			for r := range reqs {
				// the row is copied into the client's one-slot reply
				// channel, as usched copies it into the client's slot: no
				// allocation per request
				r.reply <- selectFind(t, r.key)
			}
		}()
	}
	total, el, ok := runClients(start, opts.clients, func(c int, stop *atomic.Bool) (int64, bool) {
		rng := xorshiftSeed(opts.seed, uint64(c))
		reply := make(chan row, 1)
		ok := true
		var i int64
		for ; !stop.Load(); i++ {
			key := mix64(xorshift(&rng) % selectRows)
			reqs <- request{key, reply}
			r := <-reply
			var s uint64
			for _, w := range r.payload {
				s += w
			}
			ok = ok && r.key == key && s == selectSum(key)
		}
		return i, ok
	})
	close(reqs)
	swg.Wait()
	fmt.Fprintf(os.Stderr, "select: %d clients, %d servers, %d transactions in %.3f s\n",
		opts.clients, opts.servers, total, el)
	result(float64(total)/el, ok)
}

// ---- build ------------------------------------------------------------------------------

type job struct {
	units uint32
	deps  []uint32
}

func buildDag(n int64, seed uint64) []job {
	s := seed
	lcg := func() uint64 {
		s = s*6364136223846793005 + 1442695040888963407
		return s >> 33
	}
	jobs := make([]job, n)
	for i := int64(0); i < n; i++ {
		nd := lcg() % 4
		window := uint64(64)
		if uint64(i) < window {
			window = uint64(i)
		}
		if uint64(i) < nd {
			nd = uint64(i)
		}
		for d := uint64(0); d < nd; d++ {
			p := uint32(uint64(i) - 1 - lcg()%window)
			dup := false
			for _, q := range jobs[i].deps {
				dup = dup || q == p
			}
			if !dup {
				jobs[i].deps = append(jobs[i].deps, p)
			}
		}
		if lcg()%100 < 95 {
			jobs[i].units = uint32(8 + lcg()%8)
		} else {
			jobs[i].units = uint32(400 + lcg()%400)
		}
	}
	return jobs
}

func buildWork(x uint64, units uint32) uint64 {
	iters := uint64(units) * buildIters
	for k := uint64(0); k < iters; k++ {
		x = x*6364136223846793005 + k
		x ^= x >> 29
	}
	return x
}

func buildInput(jobs []job, results []uint64, i int) uint64 {
	in := mix64(uint64(i))
	for _, d := range jobs[i].deps {
		in += results[d]
	}
	return in
}

func runBuild() {
	jobs := buildDag(opts.n, opts.seed)
	succ := make([][]uint32, len(jobs))
	pending := make([]atomic.Int32, len(jobs))
	for i := range jobs {
		for _, d := range jobs[i].deps {
			succ[d] = append(succ[d], uint32(i))
		}
		pending[i].Store(int32(len(jobs[i].deps)))
	}
	results := make([]uint64, len(jobs))
	var wg sync.WaitGroup
	wg.Add(len(jobs))
	var run func(i int)
	run = func(i int) {
		results[i] = buildWork(buildInput(jobs, results, i), jobs[i].units)
		for _, s := range succ[i] {
			if pending[s].Add(-1) == 0 {
				go run(int(s))
			}
		}
		wg.Done()
	}
	start := time.Now()
	for i := range jobs {
		if len(jobs[i].deps) == 0 {
			go run(i)
		}
	}
	wg.Wait()
	el := time.Since(start)
	var sum uint64
	for _, r := range results {
		sum += r
	}
	want := buildChecksum
	if opts.n != 2000 || opts.seed != defaultSeed {
		ref := make([]uint64, len(jobs))
		want = 0
		for i := range jobs {
			ref[i] = buildWork(buildInput(jobs, ref, i), jobs[i].units)
			want += ref[i]
		}
	}
	fmt.Fprintf(os.Stderr, "build: %d jobs, checksum 0x%016x\n", opts.n, sum)
	result(float64(el.Nanoseconds())/1e6, sum == want)
}

// ---- yield ------------------------------------------------------------------------------

func runYield() {
	runtime.GOMAXPROCS(1)
	var wg sync.WaitGroup
	var count [2]int64 // yields made by each goroutine (read after wg.Wait)
	wg.Add(2)
	start := time.Now()
	for t := 0; t < 2; t++ {
		go func(t int) {
			for i := int64(0); i < opts.n; i++ {
				runtime.Gosched()
				count[t]++
			}
			wg.Done()
		}(t)
	}
	wg.Wait()
	el := time.Since(start)
	ok := countOK("yield: first goroutine's yields", count[0], opts.n)
	ok = countOK("yield: second goroutine's yields", count[1], opts.n) && ok
	result(float64(el.Nanoseconds())/float64(2*opts.n), ok)
}

// traceStart starts Go's execution tracer when --trace asked for it: the
// peer's counterpart of usched's own trace, so that the cost of tracing can
// be compared on the same workload. traceStop ends it before the result is
// printed (the trace covers the set-up and the measured run).
func traceStart() {
	if opts.trace == "" {
		return
	}
	f, err := os.Create(opts.trace)
	if err != nil {
		bad("--trace", opts.trace, err.Error())
	}
	if err := trace.Start(f); err != nil {
		bad("--trace", opts.trace, err.Error())
	}
	opts.traceFile = f
}

func traceStop() {
	if opts.traceFile == nil {
		return
	}
	trace.Stop()
	if err := opts.traceFile.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "peer-go: --trace '%s': %v\n", opts.trace, err)
		os.Exit(1)
	}
	opts.traceFile = nil
}

func main() {
	parse(os.Args[1:])
	runtime.GOMAXPROCS(opts.threads)
	traceStart()
	switch opts.w.name {
	case "pingpong":
		runPingpong()
	case "spawn":
		runSpawn()
	case "skynet":
		runSkynet()
	case "fib":
		runFib()
	case "pairs":
		runPairs()
	case "select":
		runSelect()
	case "build":
		runBuild()
	case "yield":
		runYield()
	case "echo": // echo.go
		runEcho()
	case "echo100":
		runEcho100()
	case "preempt": // preempt.go
		runPreempt()
	}
}
