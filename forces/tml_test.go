package forces

import (
	"errors"
	"io"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"
)

// tcpPair returns the two ends of a real loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- nil
			return
		}
		done <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-done
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestConnBothDirections(t *testing.T) {
	cc, sc := tcpPair(t)
	ce, fe := NewConn(cc), NewConn(sc)
	deadline := time.Now().Add(20 * time.Second)
	ce.SetDeadline(deadline)
	fe.SetDeadline(deadline)

	// Large Config messages, so writes are split across many TCP segments.
	cfgs, err := BuildConfig(Header{Src: testCE, Dst: testFE, Flags: Flags{ACK: AlwaysACK}}, nil, routeOps(20_000))
	if err != nil {
		t.Fatal(err)
	}
	const writers, heartbeatsPerWriter = 8, 200

	// FE: answer every Config, and send heartbeats from several goroutines
	// while it does.
	feErr := make(chan error, 1)
	var feWriters sync.WaitGroup
	for w := 0; w < writers; w++ {
		feWriters.Add(1)
		go func(w int) {
			defer feWriters.Done()
			for i := 0; i < heartbeatsPerWriter; i++ {
				if err := fe.WriteMessage(NewHeartbeat(testFE, testCE, uint64(w<<32|i), NoACK)); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	go func() {
		for {
			m, err := fe.ReadMessage()
			if err != nil {
				feErr <- err
				return
			}
			switch m.Header.Type {
			case MsgConfig:
				resp, err := NewConfigResponse(m)
				if err == nil {
					err = fe.WriteMessage(resp)
				}
				if err != nil {
					feErr <- err
					return
				}
			case MsgHeartbeat:
			default:
				feErr <- errors.New("FE got " + m.Header.Type.String())
				return
			}
		}
	}()

	// CE: several writers share the Config batch and add heartbeats.
	var ceWriters sync.WaitGroup
	for w := 0; w < writers; w++ {
		ceWriters.Add(1)
		go func(w int) {
			defer ceWriters.Done()
			for i := w; i < len(cfgs); i += writers {
				if err := ce.WriteMessage(cfgs[i]); err != nil {
					t.Error(err)
					return
				}
			}
			for i := 0; i < heartbeatsPerWriter; i++ {
				if err := ce.WriteMessages(NewHeartbeat(testCE, testFE, uint64(i), NoACK)); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}

	responses, heartbeats := map[uint64]int{}, 0
	for len(responses) < len(cfgs) || heartbeats < writers*heartbeatsPerWriter {
		m, err := ce.ReadMessage()
		if err != nil {
			t.Fatalf("CE read after %d responses, %d heartbeats: %v", len(responses), heartbeats, err)
		}
		switch m.Header.Type {
		case MsgConfigResponse:
			codes, err := ConfigResults(m)
			if err != nil {
				t.Fatal(err)
			}
			responses[m.Header.Correlator] = len(codes)
		case MsgHeartbeat:
			heartbeats++
		default:
			t.Fatalf("CE got %v", m.Header.Type)
		}
	}
	for _, c := range cfgs {
		if got, want := responses[c.Header.Correlator], len(Items(c)); got != want {
			t.Errorf("correlator %d: %d results, want %d", c.Header.Correlator, got, want)
		}
	}
	ceWriters.Wait()
	feWriters.Wait()

	// Closing the CE's write side gives the FE a clean EOF at a message boundary.
	if err := cc.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if err := <-feErr; err != io.EOF {
		t.Fatalf("FE read error = %v, want io.EOF", err)
	}
}

func TestConnBadStreams(t *testing.T) {
	hb, err := NewHeartbeat(testFE, testCE, 1, NoACK).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), ErrVersion},
		{"length below header", unhex(t, "10 0f 0005 00000001 40000000 0000000000000001 00000000"), ErrLength},
		{"truncated header", hb[:10], io.ErrUnexpectedEOF},
		{"truncated body", unhex(t, "10 0f 0008 00000001 40000000 0000000000000001 00000000 0000"), io.ErrUnexpectedEOF},
		{"malformed body", unhex(t, "10 03 0008 00000001 40000000 0000000000000001 00000000 1000 0009 00000000"), ErrMalformed},
		// Oversize: the largest Length a header can claim, with the body cut off.
		{"oversize claim", unhex(t, "10 03 ffff 00000001 40000000 0000000000000001 00000000"), io.ErrUnexpectedEOF},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cc, sc := tcpPair(t)
			r := NewConn(sc)
			r.SetReadDeadline(time.Now().Add(10 * time.Second))
			go func() {
				// A valid message first, then the bad bytes, then EOF.
				cc.Write(hb)
				cc.Write(c.data)
				cc.(*net.TCPConn).CloseWrite()
			}()
			m, err := r.ReadMessage()
			if err != nil || m.Header.Type != MsgHeartbeat {
				t.Fatalf("first message = %v, %v", m, err)
			}
			_, err = r.ReadMessage()
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

func TestConnWriteInvalid(t *testing.T) {
	cc, _ := tcpPair(t)
	c := NewConn(cc)
	if err := c.WriteMessage(&Message{Header: Header{Version: 3}}); !errors.Is(err, ErrVersion) {
		t.Fatalf("err = %v", err)
	}
	if c.RemoteAddr() == nil || c.LocalAddr() == nil {
		t.Fatal("nil address")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// Messages read into one reused MessageBuffer come out as ReadMessage (and
// Parse) gives them, whatever the buffer held before: every kind splitplane
// sends, interleaved with large Configs that grow the buffer's arrays. Once
// the buffer has grown, a large Config costs no allocation.
func TestReadMessageIntoReuses(t *testing.T) {
	cc, sc := tcpPair(t)
	w, r := NewConn(cc), NewConn(sc)
	r.SetDeadline(time.Now().Add(20 * time.Second))
	big, err := BuildConfig(Header{Src: testCE, Dst: testFE, Flags: Flags{ACK: AlwaysACK}}, nil, routeOps(4_000))
	if err != nil {
		t.Fatal(err)
	}
	var want []*Message
	for i, s := range samples(t) {
		want = append(want, s.msg, big[i%len(big)])
	}
	var raw [][]byte
	for _, m := range want {
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, b)
	}
	go func() {
		for _, b := range raw {
			if err := w.WriteEncoded(b); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var mb MessageBuffer
	for i, b := range raw {
		got, err := r.ReadMessageInto(&mb)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		exp, err := Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, exp) {
			t.Fatalf("message %d (%v) read into a reused buffer:\n%+v\nwant\n%+v", i, exp.Header.Type, got, exp)
		}
	}

	// Allocations: parsing the largest Config into the grown buffer.
	largest := raw[1]
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := mb.Parse(largest); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Errorf("parsing a %d-byte Config into a grown MessageBuffer allocates %.0f times, want 0", len(largest), allocs)
	}
}
