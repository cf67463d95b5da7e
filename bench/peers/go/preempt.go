package main

// preempt (bench/WORKLOADS.md): short requests beside CPU hogs on the same
// CPUs, as tools/usched/bench_preempt.c. One hog goroutine per thread
// computes without a call until the run ends (it reads the clock every
// hogChunk turns); a generator goroutine releases request i at
// t0 + i x preemptGap (open loop) as a new goroutine that computes
// reqIters rounds of mix64 and records completion minus arrival. The value
// is the 99th percentile in microseconds (the median goes to stderr). Go
// preempts a goroutine that has run 10 ms (sysmon's forcePreemptNS).

import (
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

const (
	preemptGap = time.Millisecond
	reqIters   = 2000
	hogChunk   = 100000
)

// hogSink keeps the hogs' loops from being optimised away.
var hogSink atomic.Uint64

func requestWork(i int64) uint64 {
	x := uint64(i)
	for k := 0; k < reqIters; k++ {
		x = mix64(x + uint64(k))
	}
	return x
}

func runPreempt() {
	n := int64(opts.duration * float64(time.Second) / float64(preemptGap))
	if n < 1 {
		n = 1
	}
	lat := make([]time.Duration, n)
	var sum atomic.Uint64
	var wg sync.WaitGroup
	t0 := time.Now().Add(10 * time.Millisecond) // the hogs start first
	end := t0.Add(time.Duration(opts.duration * float64(time.Second)))
	for t := 0; t < opts.threads; t++ {
		wg.Add(1)
		go func() {
			x := uint64(0)
			for time.Now().Before(end) {
				for k := 0; k < hogChunk; k++ {
					x++
				}
			}
			hogSink.Add(x) // keeps the loop
			wg.Done()
		}()
	}
	for i := int64(0); i < n; i++ {
		at := t0.Add(time.Duration(i) * preemptGap)
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		wg.Add(1)
		go func(i int64, at time.Time) {
			sum.Add(requestWork(i))
			lat[i] = time.Since(at)
			wg.Done()
		}(i, at)
	}
	wg.Wait()
	want := uint64(0)
	for i := int64(0); i < n; i++ {
		want += requestWork(i)
	}
	ok := sum.Load() == want
	if !ok {
		fmt.Fprintf(os.Stderr, "peer-go: preempt: checksum %x, expected %x\n", sum.Load(), want)
	}
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	p50 := float64(lat[n/2].Nanoseconds()) / 1e3
	p99 := float64(lat[int64(float64(n)*0.99)].Nanoseconds()) / 1e3
	fmt.Fprintf(os.Stderr, "peer-go: preempt: %d requests, p50 %.1f us, p99 %.1f us\n", n, p50, p99)
	result(p99, ok)
}
