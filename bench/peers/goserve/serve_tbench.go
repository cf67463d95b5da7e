package main

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
)

// tbench: [u32 n][n bytes, the first word the reply size] -> [u32 size][size bytes].
const tbenchMax = 70000

var tbenchZeros [tbenchMax]byte

func serveTbench(c net.Conn, r *bufio.Reader, w *bufio.Writer) {
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:4]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:4])
		if n < 4 || n+4 >= tbenchMax {
			return
		}
		if _, err := io.ReadFull(r, hdr[4:8]); err != nil {
			return
		}
		want := binary.BigEndian.Uint32(hdr[4:8])
		if want+4 >= tbenchMax {
			return
		}
		if _, err := r.Discard(int(n - 4)); err != nil {
			return
		}
		binary.BigEndian.PutUint32(hdr[:4], want)
		w.Write(hdr[:4])
		w.Write(tbenchZeros[:want])
		if flushIfIdle(r, w) != nil {
			return
		}
	}
}
