package forces

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"
)

// A peer that sends a header and then trickles the body is cut off after the
// message timeout, while an idle peer is not.
func TestConnSlowloris(t *testing.T) {
	cc, sc := tcpPair(t)
	fe := NewConn(sc)
	fe.SetMessageTimeout(300 * time.Millisecond)

	raw, _ := configSet().MarshalBinary()
	// Idle longer than the message timeout, then a whole message: fine.
	go func() {
		time.Sleep(500 * time.Millisecond)
		cc.Write(raw)
	}()
	if _, err := fe.ReadMessage(); err != nil {
		t.Fatalf("message after idle period: %v", err)
	}

	// A header, then one byte every 100ms: cut off.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		cc.Write(raw[:HeaderLen])
		for _, b := range raw[HeaderLen:] {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := cc.Write([]byte{b}); err != nil {
				return
			}
		}
	}()
	start := time.Now()
	_, err := fe.ReadMessage()
	if !errors.Is(err, ErrMessageTimeout) {
		t.Fatalf("trickling peer: err = %v, want ErrMessageTimeout", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("cut off after %v", d)
	}
}

// The caller's own read deadline still applies, and is restored after each
// message.
func TestConnDeadlinesWithMessageTimeout(t *testing.T) {
	cc, sc := tcpPair(t)
	fe := NewConn(sc)
	fe.SetMessageTimeout(time.Hour)
	fe.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	raw, _ := configSet().MarshalBinary()
	cc.Write(raw[:10])
	if _, err := fe.ReadMessage(); err == nil || errors.Is(err, ErrMessageTimeout) {
		t.Fatalf("caller deadline: err = %v, want a plain timeout", err)
	}

	cc2, sc2 := tcpPair(t)
	fe2 := NewConn(sc2)
	fe2.SetMessageTimeout(50 * time.Millisecond)
	go func() {
		cc2.Write(raw[:HeaderLen])
		time.Sleep(10 * time.Millisecond)
		cc2.Write(raw[HeaderLen:])
	}()
	if _, err := fe2.ReadMessage(); err != nil {
		t.Fatal(err)
	}
	// The message deadline is gone: an idle wait longer than it succeeds.
	go func() {
		time.Sleep(150 * time.Millisecond)
		cc2.Write(raw)
	}()
	if _, err := fe2.ReadMessage(); err != nil {
		t.Fatalf("after a message, the message deadline lingered: %v", err)
	}
}

func TestConnMaxMessageSize(t *testing.T) {
	cc, sc := tcpPair(t)
	fe := NewConn(sc)
	fe.SetMaxMessageSize(1024)
	big := msgWith(MsgConfig, make([]byte, 2048))
	go cc.Write(big)
	if _, err := fe.ReadMessage(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
}

type tapRecord struct {
	raw  []byte
	sent bool
}

func TestConnTap(t *testing.T) {
	cc, sc := tcpPair(t)
	ce, fe := NewConn(cc), NewConn(sc)
	var mu sync.Mutex
	var recs []tapRecord
	ce.SetTap(func(raw []byte, sent bool) {
		mu.Lock()
		recs = append(recs, tapRecord{bytes.Clone(raw), sent})
		mu.Unlock()
	})
	var pcap bytes.Buffer
	pw, _ := NewPcapWriter(&pcap)
	fe.SetTap(pw.Tap(false))

	hb := NewHeartbeat(testCE, testFE, 1, AlwaysACK)
	cfg := configSet()
	if err := ce.WriteMessages(hb, cfg); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := fe.ReadMessage(); err != nil {
			t.Fatal(err)
		}
	}
	reply := NewHeartbeat(testFE, testCE, 1, NoACK)
	if err := fe.WriteMessage(reply); err != nil {
		t.Fatal(err)
	}
	if _, err := ce.ReadMessage(); err != nil {
		t.Fatal(err)
	}
	want := []tapRecord{{mustMarshal(t, hb), true}, {mustMarshal(t, cfg), true}, {mustMarshal(t, reply), false}}
	mu.Lock()
	defer mu.Unlock()
	if len(recs) != len(want) {
		t.Fatalf("tap saw %d messages, want %d", len(recs), len(want))
	}
	for i := range want {
		if !bytes.Equal(recs[i].raw, want[i].raw) || recs[i].sent != want[i].sent {
			t.Errorf("tap record %d: sent=%v % x", i, recs[i].sent, recs[i].raw[:8])
		}
	}
	// FE side: two received (from the CE) and one sent, on one stream.
	got := readPcap(t, pcap.Bytes())
	if len(got) != len(want) {
		t.Fatalf("pcap holds %d messages", len(got))
	}
	for i := range want {
		if !bytes.Equal(got[i].raw, want[i].raw) || got[i].fromCE != want[i].sent {
			t.Errorf("pcap message %d differs", i)
		}
	}
	if pw.Err() != nil {
		t.Error(pw.Err())
	}
	ce.SetTap(nil)
	ce.WriteMessage(hb)
	fe.ReadMessage()
	if len(recs) != 3 {
		t.Error("tap called after removal")
	}
}

func mustMarshal(t *testing.T, m *Message) []byte {
	t.Helper()
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
