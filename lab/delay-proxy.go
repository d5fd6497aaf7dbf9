// A WAN in a box, compiled: forwards TCP from 127.0.0.1:LISTEN_PORT to 127.0.0.1:TARGET_PORT,
// holding every chunk for DELAY_MS in each direction (a round trip costs 2 x DELAY_MS), in
// order; bandwidth is not limited, only latency added. As lab/delay-proxy.py does, without
// its cost per connection and per chunk (one Python thread for every connection's every
// chunk), which weighs on a client of hundreds of connections (s5cmd's 256 workers).
//
// Usage: go run lab/delay-proxy.go LISTEN_PORT TARGET_PORT DELAY_MS  (LISTEN_PORT 0: any free
// port). It prints "listening on PORT" once it listens, as lab/s3-proxy.py does.
// Only loopback. Standard library only: `go build lab/delay-proxy.go` needs no module.
package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

type chunk struct {
	due  time.Time
	data []byte
}

// pipe copies from `from` to `to`, each chunk sent `delay` after it arrived.
func pipe(from, to net.Conn, delay time.Duration) {
	queue := make(chan chunk, 4096)
	go func() {
		defer close(queue)
		for {
			buf := make([]byte, 64<<10)
			n, err := from.Read(buf)
			if n > 0 {
				queue <- chunk{time.Now().Add(delay), buf[:n]}
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
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: delay-proxy LISTEN_PORT TARGET_PORT DELAY_MS")
		os.Exit(2)
	}
	ms, err := strconv.Atoi(os.Args[3])
	if err != nil || ms < 0 {
		fmt.Fprintln(os.Stderr, "delay-proxy: DELAY_MS is a whole number of milliseconds")
		os.Exit(2)
	}
	delay := time.Duration(ms) * time.Millisecond
	target := "127.0.0.1:" + os.Args[2]
	listener, err := net.Listen("tcp", "127.0.0.1:"+os.Args[1])
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
			done := make(chan struct{}, 2)
			go func() { pipe(client, server, delay); done <- struct{}{} }()
			go func() { pipe(server, client, delay); done <- struct{}{} }()
			<-done
			<-done
			client.Close()
			server.Close()
		}()
	}
}
