package integration_test

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/integration/lab"
	"github.com/splitplane/splitplane/internal/nsthread"
)

// vlbOf returns FE n's VLB view of its link to peer FE, or false.
func vlbOf(t *testing.T, o lab.Options, n int, peer uint32) (forces.FEVLBLinkStatus, bool) {
	t.Helper()
	st, err := lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	if v := feOf(st, n).VLB; v != nil {
		for _, l := range v.Links {
			if l.PeerFE == peer {
				return l, true
			}
		}
	}
	return forces.FEVLBLinkStatus{}, false
}

// checkVLBSpill loads FE 1's link to FE 3, whose capacity the lab declares
// as 1 Mbit/s (budget 0.8 Mbit/s), with some 2.7 Mbit/s of UDP from host 1
// to host 3's site in 64 flows. Direct VLB must spill the flows that do
// not fit through FE 2 (FE 1's ife_via, FE 2's ife_transit move; no
// kernel forwards), deliver every packet of every flow in order, and send
// every flow direct again once the load is gone.
func checkVLBSpill(t *testing.T, o lab.Options, n int) {
	t.Helper()
	h1, h3 := o.ClusterHost(1), o.ClusterHost(3)
	if l, ok := vlbOf(t, o, 1, 3); !ok || l.CapacityMbps != 1 || l.SpillPermille != 0 {
		t.Fatalf("FE 1's VLB view of its link to FE 3: %+v (found %v); want capacity 1 Mbit/s, nothing spilled", l, ok)
	}

	// The receiver on host 3: per flow, the highest sequence seen.
	const flows, payload = 64, 1000
	var rx *net.UDPConn
	if err := nsthread.Run(h3.Namespace, func() (err error) {
		rx, err = net.ListenUDP("udp4", &net.UDPAddr{Port: 9999})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	var (
		mu                   sync.Mutex
		last                 = map[uint32]uint32{}
		received, outOfOrder int
		receiverDone         = make(chan struct{})
	)
	go func() {
		defer close(receiverDone)
		b := make([]byte, 2048)
		for {
			k, err := rx.Read(b)
			if err != nil {
				return
			}
			if k < 8 {
				continue
			}
			flow, seq := binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
			mu.Lock()
			received++
			if seq <= last[flow] {
				outOfOrder++
			}
			last[flow] = seq
			mu.Unlock()
		}
	}()

	// The senders on host 1: one socket (one source port, one 5-tuple)
	// a flow.
	var conns []*net.UDPConn
	if err := nsthread.Run(h1.Namespace, func() error {
		for range flows {
			c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: h3.SiteAddr.AsSlice(), Port: 9999})
			if err != nil {
				return err
			}
			conns = append(conns, c)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	stop := make(chan struct{})
	sent := 0
	senderDone := make(chan struct{})
	go func() {
		defer close(senderDone)
		b := make([]byte, payload)
		seq := uint32(0)
		tick := time.NewTicker(3 * time.Millisecond) // ~333 packets/s, ~2.7 Mbit/s
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			f := sent % flows
			if f == 0 {
				seq++
			}
			binary.BigEndian.PutUint32(b, uint32(f))
			binary.BigEndian.PutUint32(b[4:], seq)
			if _, err := conns[f].Write(b); err == nil {
				sent++
			}
		}
	}()
	stopped := false
	stopSending := func() {
		if !stopped {
			close(stop)
			<-senderDone
			stopped = true
		}
	}
	defer stopSending()

	var spilled forces.FEVLBLinkStatus
	eventually(t, 20*time.Second, "FE 1 spills flows to FE 3 under load", func() error {
		l, _ := vlbOf(t, o, 1, 3)
		if l.SpillPermille < 300 {
			return fmt.Errorf("FE 1's link to FE 3: %+v", l)
		}
		spilled = l
		return nil
	})
	t.Logf("FE 1's link to FE 3 under load: %+v", spilled)
	before := readIFECounters(t, o, n)
	time.Sleep(2 * time.Second)
	after := readIFECounters(t, o, n)
	stopSending()
	d := func(fe int, name string) uint64 { return after.ife[fe-1][name] - before.ife[fe-1][name] }
	if d(1, "ife_via") == 0 || d(2, "ife_transit") == 0 || d(3, "ife_decap") == 0 || d(1, "ife_via") >= d(1, "ife_encap") {
		t.Errorf("under load: FE 1 encapsulated %d, %d of them via an intermediate; FE 2 passed on %d; FE 3 delivered %d; want some via FE 2, some direct",
			d(1, "ife_encap"), d(1, "ife_via"), d(2, "ife_transit"), d(3, "ife_decap"))
	}
	for i := range n {
		if after.forw[i] != before.forw[i] {
			t.Errorf("FE %d's kernel forwarded %d packets under VLB", i+1, after.forw[i]-before.forw[i])
		}
	}

	// Every packet arrived, every flow in order.
	eventually(t, 5*time.Second, "every packet received", func() error {
		mu.Lock()
		defer mu.Unlock()
		if received < sent {
			return fmt.Errorf("received %d of %d", received, sent)
		}
		return nil
	})
	mu.Lock()
	if outOfOrder != 0 || received != sent {
		t.Errorf("%d packets sent in %d flows, %d received, %d out of order within their flow", sent, flows, received, outOfOrder)
	}
	mu.Unlock()
	rx.Close()
	<-receiverDone

	// The load gone, every flow goes direct again.
	eventually(t, 15*time.Second, "FE 1 sends every flow to FE 3 direct again", func() error {
		if l, _ := vlbOf(t, o, 1, 3); l.SpillPermille != 0 {
			return fmt.Errorf("FE 1's link to FE 3: %+v", l)
		}
		return nil
	})
}
