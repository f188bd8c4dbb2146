package forces

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// flood connects a TCP pair over loopback and has the far end write msg
// back to back until the connection ends; it returns the near end.
func flood(b *testing.B, msg *Message) net.Conn {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	raw, err := msg.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]byte, 0, 64*len(raw))
	for range 64 {
		batch = append(batch, raw...)
	}
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return
		}
		defer c.Close()
		for {
			if _, err := c.Write(batch); err != nil {
				return
			}
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkAssocReceive is the FE reader's path for each Config or Query:
// the association's ID checks, dead-interval deadline and handler hand-off
// with reused buffers, against the FE's reader loop before the association machine (conn).
func BenchmarkAssocReceive(b *testing.B) {
	msg := NewQuery(testCE, testFE, 1, GetSelect(PortTableClass, PortTableInstance, []uint32{PortTableComponent}))
	policy := func() (time.Duration, time.Duration) { return 0, time.Minute }
	b.Run("assoc", func(b *testing.B) {
		conn := NewConn(flood(b, msg))
		free := make(chan *MessageBuffer, 3)
		n := 0
		var a *Assoc
		a = NewAssoc(conn, AssocConfig{Local: testFE, Peer: testCE, Policy: policy,
			Buffer: func() *MessageBuffer {
				select {
				case mb := <-free:
					return mb
				default:
					return new(MessageBuffer)
				}
			},
			Handlers: map[MessageType]Handler{MsgQuery: func(m *Message, mb *MessageBuffer) (bool, error) {
				free <- mb
				if n++; n == b.N {
					a.End(errDone)
				}
				return true, nil
			}}})
		b.ReportAllocs()
		b.ResetTimer()
		if err := a.Run(context.Background()); !errors.Is(err, errDone) {
			b.Fatal(err)
		}
	})
	b.Run("conn", func(b *testing.B) {
		conn := NewConn(flood(b, msg))
		free := make(chan *MessageBuffer, 3)
		var mb *MessageBuffer
		b.ReportAllocs()
		b.ResetTimer()
		for n := 0; n < b.N; {
			_, dead := policy()
			conn.SetReadDeadline(time.Now().Add(dead))
			if mb == nil {
				select {
				case mb = <-free:
				default:
					mb = new(MessageBuffer)
				}
			}
			m, err := conn.ReadMessageInto(mb)
			if err != nil {
				b.Fatal(err)
			}
			if m.Header.Src != testCE || m.Header.Dst != testFE {
				b.Fatal("wrong IDs")
			}
			switch m.Header.Type {
			case MsgQuery:
				free <- mb
				mb = nil
				n++
			}
		}
	})
}

var errDone = errors.New("done")
