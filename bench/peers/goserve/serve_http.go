package main

import (
	"bufio"
	"bytes"
	"net"
	"strconv"
)

// http: HTTP/1.1 keep-alive, GET / answers a fixed body; the same answers
// as servers/http.c.
var (
	httpOK  = []byte("HTTP/1.1 200 OK\r\nServer: usched\r\nContent-Type: text/plain\r\nContent-Length: 14\r\n\r\nHello, World!\n")
	httpBad = []byte("HTTP/1.1 400 Bad Request\r\nServer: usched\r\nContent-Type: text/plain\r\nContent-Length: 12\r\nConnection: close\r\n\r\nBad Request\n")
	http404 = []byte("HTTP/1.1 404 Not Found\r\nServer: usched\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\nNot Found\n")
)

func serveHTTP(c net.Conn, r *bufio.Reader, w *bufio.Writer) {
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		f := bytes.Fields(line)
		if len(f) != 3 || !bytes.HasPrefix(f[2], []byte("HTTP/1.")) {
			w.Write(httpBad)
			w.Flush()
			return
		}
		keep := !bytes.Equal(f[2], []byte("HTTP/1.0"))
		body := 0
		for headers := 0; ; headers++ {
			h, err := r.ReadSlice('\n')
			if err != nil || headers > 100 {
				return
			}
			if len(bytes.TrimRight(h, "\r\n")) == 0 {
				break
			}
			k, v, ok := bytes.Cut(h, []byte(":"))
			if !ok {
				w.Write(httpBad)
				w.Flush()
				return
			}
			v = bytes.TrimSpace(v)
			switch string(bytes.ToLower(k)) {
			case "connection":
				lv := bytes.ToLower(v)
				if bytes.Contains(lv, []byte("close")) {
					keep = false
				} else if bytes.Contains(lv, []byte("keep-alive")) {
					keep = true
				}
			case "content-length":
				n, err := strconv.Atoi(string(v))
				if err != nil || n < 0 || n > 65536 {
					w.Write(httpBad)
					w.Flush()
					return
				}
				body = n
			}
		}
		if _, err := r.Discard(body); err != nil {
			return
		}
		if string(f[1]) == "/" {
			w.Write(httpOK)
		} else {
			w.Write(http404)
		}
		if !keep {
			w.Flush()
			return
		}
		if flushIfIdle(r, w) != nil {
			return
		}
	}
}
