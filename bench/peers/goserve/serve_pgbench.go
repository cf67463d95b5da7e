package main

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"strings"
)

// pgbench: the PostgreSQL v3 simple-query protocol for pgbench's
// select-only script (-S) and the statements it sends before a run, over
// the same in-memory accounts as servers/pgbench.c (balances stay 0: the
// Go peer does not run the tpcb-like script).
var pgScale = 1

func pgMsg(w *bufio.Writer, t byte, body []byte) {
	var hdr [5]byte
	hdr[0] = t
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(body)+4))
	w.Write(hdr[:])
	w.Write(body)
}

func pgCStr(b []byte, s string) []byte { return append(append(b, s...), 0) }

func pgBE32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }

func pgBE16(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }

// pgOneInt answers a query with one integer column.
func pgOneInt(w *bufio.Writer, col string, oid uint32, size uint16, v string) {
	d := pgBE16(nil, 1)
	d = pgCStr(d, col)
	d = pgBE32(d, 0)
	d = pgBE16(d, 0)
	d = pgBE32(d, oid)
	d = pgBE16(d, size)
	d = pgBE32(d, 0xffffffff)
	d = pgBE16(d, 0)
	pgMsg(w, 'T', d)
	row := pgBE16(nil, 1)
	row = pgBE32(row, uint32(len(v)))
	row = append(row, v...)
	pgMsg(w, 'D', row)
	pgMsg(w, 'C', pgCStr(nil, "SELECT 1"))
}

func pgReady(w *bufio.Writer) { pgMsg(w, 'Z', []byte{'I'}) }

func pgError(w *bufio.Writer, state, msg string) {
	b := pgCStr([]byte{'S'}, "ERROR")
	b = pgCStr(append(b, 'C'), state)
	b = pgCStr(append(b, 'M'), msg)
	pgMsg(w, 'E', append(b, 0))
}

func pgQuery(w *bufio.Writer, q string) {
	q = strings.ToLower(strings.Join(strings.Fields(strings.TrimRight(strings.TrimSpace(q), ";")), " "))
	const sel = "select abalance from pgbench_accounts where aid = "
	switch {
	case strings.HasPrefix(q, sel):
		aid, err := strconv.Atoi(q[len(sel):])
		if err != nil || aid < 1 || aid > 100000*pgScale {
			pgError(w, "42601", "bad aid")
		} else {
			pgOneInt(w, "abalance", 23, 4, "0")
		}
	case q == "select count(*) from pgbench_branches":
		pgOneInt(w, "count", 20, 8, strconv.Itoa(pgScale))
	case strings.HasPrefix(q, "select o.n, p.partstrat"):
		pgError(w, "0A000", "not partitioned") // pgbench takes an error as "no partitions"
	default:
		pgError(w, "42601", "statement not supported")
	}
	pgReady(w)
}

func servePgbench(c net.Conn, r *bufio.Reader, w *bufio.Writer) {
	var hdr [8]byte
	for { // SSLRequest / GSSENCRequest, then the StartupMessage
		if _, err := io.ReadFull(r, hdr[:8]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:4])
		code := binary.BigEndian.Uint32(hdr[4:8])
		if n < 8 || n > 10000 {
			return
		}
		if _, err := r.Discard(int(n - 8)); err != nil {
			return
		}
		if code == 80877103 || code == 80877104 {
			w.WriteByte('N')
			w.Flush()
			continue
		}
		if code>>16 != 3 {
			return
		}
		break
	}
	pgMsg(w, 'R', []byte{0, 0, 0, 0})
	pgMsg(w, 'S', pgCStr(pgCStr(nil, "server_version"), "15.0"))
	pgMsg(w, 'S', pgCStr(pgCStr(nil, "client_encoding"), "UTF8"))
	pgReady(w)
	w.Flush()
	for {
		if _, err := io.ReadFull(r, hdr[:5]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[1:5])
		if n < 4 || n > 1<<20 {
			return
		}
		body := make([]byte, n-4)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		switch hdr[0] {
		case 'Q':
			pgQuery(w, strings.TrimRight(string(body), "\x00"))
		case 'X':
			return
		default:
			pgError(w, "0A000", "only the simple query protocol")
			pgReady(w)
		}
		if flushIfIdle(r, w) != nil {
			return
		}
	}
}
