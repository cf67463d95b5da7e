// peer-goserve: the Go peer of `usched serve`. The same five protocols
// (servers/ in C), each a goroutine per connection over the standard
// library's net package, so `usched bench tbench|pgbench|redis|http --peers`
// compares usched's fibers with Go's netpoller on identical work.
//
//	peer-goserve PROTOCOL [--port N] [--host ADDR] [--threads N] [--scale N]
//
// It prints "listening on HOST:PORT" once the socket accepts, and serves
// until SIGINT or SIGTERM. Exit status 2 for bad usage, 1 when it cannot
// listen.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
)

type handler func(c net.Conn, r *bufio.Reader, w *bufio.Writer)

var protocols = map[string]struct {
	port int
	h    handler
}{
	"tbench":  {7003, serveTbench},
	"pgbench": {5432, servePgbench},
	"redis":   {6379, serveRedis},
	"http":    {8080, serveHTTP},
	"echo":    {7007, serveEcho},
}

func usage(msg string) {
	fmt.Fprintf(os.Stderr, "peer-goserve: %s\nusage: peer-goserve tbench|pgbench|redis|http|echo [--port N] [--host ADDR] [--threads N] [--scale N]\n", msg)
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage("no protocol given")
	}
	name := os.Args[1]
	p, ok := protocols[name]
	if !ok {
		usage("unknown protocol '" + name + "'")
	}
	fs := flag.NewFlagSet("peer-goserve", flag.ContinueOnError)
	port := fs.Int("port", p.port, "port (0: any free port)")
	host := fs.String("host", "127.0.0.1", "address to bind")
	threads := fs.Int("threads", 0, "GOMAXPROCS (0: the CPUs this process may use)")
	scale := fs.Int("scale", 1, "pgbench: scale factor")
	if err := fs.Parse(os.Args[2:]); err != nil {
		usage(err.Error())
	}
	if *port < 0 || *port > 65535 || *threads < 0 || *scale < 1 || *scale > 100 {
		usage("--port must be in [0, 65535], --threads >= 0, --scale in [1, 100]")
	}
	if *threads > 0 {
		runtime.GOMAXPROCS(*threads)
	}
	pgScale = *scale
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		fmt.Fprintf(os.Stderr, "peer-goserve %s: %v\n", name, err)
		os.Exit(1)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		<-sig
		os.Exit(0)
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			continue
		}
		go func() {
			defer c.Close()
			p.h(c, bufio.NewReaderSize(c, 65536), bufio.NewWriterSize(c, 65536))
		}()
	}
}

// flushIfIdle sends the buffered replies once no further request has
// arrived, so pipelined requests get their replies in one write.
func flushIfIdle(r *bufio.Reader, w *bufio.Writer) error {
	if r.Buffered() > 0 {
		return nil
	}
	return w.Flush()
}
