// The echo workloads (bench/WORKLOADS.md): TCP echo over loopback with the
// net package (Go's netpoller). echo: one connection, ns per round trip;
// echo100: 100 connections for --duration, messages per second.
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

const (
	echoMsg   = 64
	echoConns = 100
	echoBuf   = 4096
)

func echoByte(c, i int64, k int) byte {
	return byte(i*7 + int64(k) + c*13)
}

func tcpEchoServe(conn net.Conn) {
	defer conn.Close()
	buf := make([]byte, echoBuf)
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			if _, werr := conn.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// tcpEchoListen starts the server: an accepting goroutine and one per connection.
func tcpEchoListen() (net.Listener, *sync.WaitGroup) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintf(os.Stderr, "peer-go: echo: listen: %v\n", err)
		os.Exit(1)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*net.TCPConn).SetNoDelay(true)
			wg.Add(1)
			go func() {
				defer wg.Done()
				tcpEchoServe(c)
			}()
		}
	}()
	return ln, &wg
}

func tcpEchoDial(ln net.Listener) net.Conn {
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		fmt.Fprintf(os.Stderr, "peer-go: echo: dial: %v\n", err)
		os.Exit(1)
	}
	c.(*net.TCPConn).SetNoDelay(true)
	return c
}

// tcpEchoRoundTrip writes message i of connection c and reads it back.
func tcpEchoRoundTrip(conn net.Conn, msg, back []byte, c, i int64) bool {
	for k := range msg {
		msg[k] = echoByte(c, i, k)
	}
	if _, err := conn.Write(msg); err != nil {
		return false
	}
	if _, err := io.ReadFull(conn, back); err != nil {
		return false
	}
	for k := range back {
		if back[k] != echoByte(c, i, k) {
			return false
		}
	}
	return true
}

func runEcho() {
	ln, wg := tcpEchoListen()
	conn := tcpEchoDial(ln)
	msg, back := make([]byte, echoMsg), make([]byte, echoMsg)
	ok := true
	start := time.Now()
	var i int64
	for i = 0; i < opts.n && ok; i++ {
		if i%checkEvery == 0 && i > 0 && capped(start) {
			break
		}
		ok = tcpEchoRoundTrip(conn, msg, back, 0, i)
	}
	el := time.Since(start)
	conn.Close()
	ln.Close()
	wg.Wait()
	fmt.Fprintf(os.Stderr, "echo: %d round trips in %.3f s\n", i, el.Seconds())
	result(float64(el.Nanoseconds())/float64(i), ok)
}

func runEcho100() {
	ln, wg := tcpEchoListen()
	conns := make([]net.Conn, echoConns)
	for c := range conns {
		conns[c] = tcpEchoDial(ln)
	}
	start := time.Now()
	total, el, ok := runClients(start, echoConns, func(c int, stop *atomic.Bool) (int64, bool) {
		msg, back := make([]byte, echoMsg), make([]byte, echoMsg)
		ok := true
		var i int64
		for ; ok && !stop.Load(); i++ {
			ok = tcpEchoRoundTrip(conns[c], msg, back, int64(c), i)
		}
		return i, ok
	})
	for _, c := range conns {
		c.Close()
	}
	ln.Close()
	wg.Wait()
	fmt.Fprintf(os.Stderr, "echo100: %d round trips on %d connections in %.3f s\n", total, echoConns, el)
	result(float64(total)/el, ok)
}
