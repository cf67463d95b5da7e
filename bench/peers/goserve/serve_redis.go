package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
)

// redis: RESP2 with pipelining; the commands redis-benchmark's -t
// ping,set,get,incr,lpush,rpush,lpop,rpop,mset use, over a sharded map.
const redisShards = 64

type redisShard struct {
	sync.Mutex
	str  map[string][]byte
	list map[string][][]byte
}

var keyspace [redisShards]redisShard

func init() {
	for i := range keyspace {
		keyspace[i].str = map[string][]byte{}
		keyspace[i].list = map[string][][]byte{}
	}
}

func shardOf(k []byte) *redisShard {
	h := uint32(2166136261)
	for _, b := range k {
		h = (h ^ uint32(b)) * 16777619
	}
	return &keyspace[h%redisShards]
}

var errProto = errors.New("Protocol error")

func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, errProto
	}
	return line[:len(line)-2], nil
}

// readCommand returns the arguments of the next command (copied).
func readCommand(r *bufio.Reader) ([][]byte, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	if len(line) == 0 || line[0] != '*' {
		f := strings.Fields(string(line))
		args := make([][]byte, len(f))
		for i := range f {
			args[i] = []byte(f[i])
		}
		return args, nil
	}
	n, err := strconv.Atoi(string(line[1:]))
	if err != nil || n > 1024 {
		return nil, errProto
	}
	args := make([][]byte, 0, n)
	for i := 0; i < n; i++ {
		line, err := readLine(r)
		if err != nil {
			return nil, err
		}
		if len(line) == 0 || line[0] != '$' {
			return nil, errProto
		}
		l, err := strconv.Atoi(string(line[1:]))
		if err != nil || l < 0 || l > 1<<20 {
			return nil, errProto
		}
		b := make([]byte, l+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		args = append(args, b[:l])
	}
	return args, nil
}

func bulk(w *bufio.Writer, b []byte) {
	if b == nil {
		w.WriteString("$-1\r\n")
		return
	}
	w.WriteString("$")
	w.WriteString(strconv.Itoa(len(b)))
	w.WriteString("\r\n")
	w.Write(b)
	w.WriteString("\r\n")
}

func integer(w *bufio.Writer, n int) {
	w.WriteString(":")
	w.WriteString(strconv.Itoa(n))
	w.WriteString("\r\n")
}

func redisExec(w *bufio.Writer, a [][]byte) {
	cmd := strings.ToLower(string(a[0]))
	switch {
	case cmd == "ping" && len(a) == 1:
		w.WriteString("+PONG\r\n")
	case cmd == "set" && len(a) == 3:
		s := shardOf(a[1])
		s.Lock()
		s.str[string(a[1])] = a[2]
		s.Unlock()
		w.WriteString("+OK\r\n")
	case cmd == "get" && len(a) == 2:
		s := shardOf(a[1])
		s.Lock()
		v := s.str[string(a[1])]
		s.Unlock()
		bulk(w, v)
	case cmd == "incr" && len(a) == 2:
		s := shardOf(a[1])
		s.Lock()
		n, err := 0, error(nil)
		if v, ok := s.str[string(a[1])]; ok {
			n, err = strconv.Atoi(string(v))
		}
		if err == nil {
			n++
			s.str[string(a[1])] = []byte(strconv.Itoa(n))
		}
		s.Unlock()
		if err != nil {
			w.WriteString("-ERR value is not an integer or out of range\r\n")
		} else {
			integer(w, n)
		}
	case (cmd == "lpush" || cmd == "rpush") && len(a) >= 3:
		s := shardOf(a[1])
		s.Lock()
		l := s.list[string(a[1])]
		for _, v := range a[2:] {
			if cmd == "lpush" {
				l = append([][]byte{v}, l...)
			} else {
				l = append(l, v)
			}
		}
		s.list[string(a[1])] = l
		n := len(l)
		s.Unlock()
		integer(w, n)
	case (cmd == "lpop" || cmd == "rpop") && len(a) == 2:
		s := shardOf(a[1])
		s.Lock()
		l := s.list[string(a[1])]
		var v []byte
		if len(l) > 0 {
			if cmd == "lpop" {
				v, l = l[0], l[1:]
			} else {
				v, l = l[len(l)-1], l[:len(l)-1]
			}
			s.list[string(a[1])] = l
		}
		s.Unlock()
		bulk(w, v)
	case cmd == "mset" && len(a) >= 3 && len(a)%2 == 1:
		for i := 1; i < len(a); i += 2 {
			s := shardOf(a[i])
			s.Lock()
			s.str[string(a[i])] = a[i+1]
			s.Unlock()
		}
		w.WriteString("+OK\r\n")
	case cmd == "config" && len(a) == 3:
		switch strings.ToLower(string(a[2])) {
		case "save":
			w.WriteString("*2\r\n$4\r\nsave\r\n$0\r\n\r\n")
		case "appendonly":
			w.WriteString("*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n")
		default:
			w.WriteString("*0\r\n")
		}
	default:
		w.WriteString("-ERR unknown command or wrong number of arguments\r\n")
	}
}

func serveRedis(c net.Conn, r *bufio.Reader, w *bufio.Writer) {
	for {
		a, err := readCommand(r)
		if err == errProto {
			w.WriteString("-ERR Protocol error\r\n")
			w.Flush()
			return
		}
		if err != nil {
			return
		}
		if len(a) > 0 {
			redisExec(w, a)
		}
		if flushIfIdle(r, w) != nil {
			return
		}
	}
}
