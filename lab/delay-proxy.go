// The lab's one delay proxy, a WAN in a box: forwards TCP from 127.0.0.1:LISTEN_PORT to
// 127.0.0.1:TARGET_PORT, holding every chunk for DELAY_MS in each direction (a round trip costs
// 2 x DELAY_MS), in order; bandwidth is not limited, only latency added. Compiled, because a
// proxy in Python spends a core of its own on a client of hundreds of connections (s5cmd's 256
// workers) and slowed what it measured; lab/netfs, the benches and the image pulls all go
// through this one.
//
// With -stats FILE the bytes going to the server are also read as HTTP/1.1 requests (a copy,
// beside the forwarding), counted by method, and the counts written to FILE after each request:
// {"requests": {"GET": 3, "PUT": 2}}. A stream that is not HTTP (sshfs's) is not counted.
//
// Usage: delay-proxy [-stats FILE] LISTEN_PORT TARGET_PORT DELAY_MS  (LISTEN_PORT 0: any free
// port). It prints "listening on PORT" once it listens. Only loopback. Standard library only:
// lab/build builds it with `go build` (no module needed).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

type chunk struct {
	due  time.Time
	data []byte
}

// counts is the requests seen by method, rewritten to its file after each one.
type counts struct {
	mu     sync.Mutex
	path   string
	byVerb map[string]int
}

func (c *counts) add(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byVerb[method]++
	text, _ := json.Marshal(map[string]map[string]int{"requests": c.byVerb})
	tmp := c.path + ".tmp"
	// Renamed into place: a reader never sees half a file.
	if os.WriteFile(tmp, append(text, '\n'), 0o644) == nil {
		os.Rename(tmp, c.path)
	}
}

// tap reads requests from r until it ends or is not HTTP, counting each; then drains r so that
// the forwarding never waits for it.
func tap(r io.Reader, c *counts) {
	br := bufio.NewReader(r)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			io.Copy(io.Discard, br)
			return
		}
		c.add(req.Method)
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
}

// pipe copies from `from` to `to`, each chunk sent `delay` after it arrived; with a `tee`, the
// chunks are also written there as they arrive.
func pipe(from, to net.Conn, delay time.Duration, tee *io.PipeWriter) {
	queue := make(chan chunk, 4096)
	go func() {
		defer close(queue)
		if tee != nil {
			defer tee.Close()
		}
		for {
			buf := make([]byte, 64<<10)
			n, err := from.Read(buf)
			if n > 0 {
				queue <- chunk{time.Now().Add(delay), buf[:n]}
				if tee != nil {
					tee.Write(buf[:n])
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range queue {
		if wait := time.Until(c.due); wait > 0 {
			time.Sleep(wait)
		}
		if _, err := to.Write(c.data); err != nil {
			break
		}
	}
	// The other side learns of the end as a half close, as a direct connection would.
	if tcp, ok := to.(*net.TCPConn); ok {
		tcp.CloseWrite()
	} else {
		to.Close()
	}
}

func main() {
	statsPath := flag.String("stats", "", "count HTTP requests by method into this JSON file")
	flag.Parse()
	if flag.NArg() != 3 {
		fmt.Fprintln(os.Stderr, "usage: delay-proxy [-stats FILE] LISTEN_PORT TARGET_PORT DELAY_MS")
		os.Exit(2)
	}
	ms, err := strconv.ParseFloat(flag.Arg(2), 64)
	if err != nil || ms < 0 {
		fmt.Fprintln(os.Stderr, "delay-proxy: DELAY_MS is a number of milliseconds")
		os.Exit(2)
	}
	delay := time.Duration(ms * float64(time.Millisecond))
	var stats *counts
	if *statsPath != "" {
		stats = &counts{path: *statsPath, byVerb: map[string]int{}}
	}
	target := "127.0.0.1:" + flag.Arg(1)
	listener, err := net.Listen("tcp", "127.0.0.1:"+flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "delay-proxy:", err)
		os.Exit(1)
	}
	fmt.Printf("listening on %d\n", listener.Addr().(*net.TCPAddr).Port)
	os.Stdout.Sync()
	for {
		client, err := listener.Accept()
		if err != nil {
			continue
		}
		go func() {
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				return
			}
			var tee *io.PipeWriter
			if stats != nil {
				r, w := io.Pipe()
				tee = w
				go tap(r, stats)
			}
			done := make(chan struct{}, 2)
			go func() { pipe(client, server, delay, tee); done <- struct{}{} }()
			go func() { pipe(server, client, delay, nil); done <- struct{}{} }()
			<-done
			<-done
			client.Close()
			server.Close()
		}()
	}
}
