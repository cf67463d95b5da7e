package main

import (
	"bufio"
	"net"
)

func serveEcho(c net.Conn, r *bufio.Reader, w *bufio.Writer) {
	buf := make([]byte, 65536)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
