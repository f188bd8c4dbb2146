package ce

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/splitplane/splitplane/forces"
)

// The CE's handling of whatever an FE sends, after the message parses: a
// running CE (its loop, RIB and FIB) serves each input on a fresh
// association over net.Pipe, with the fuzzer's message placed where it
// reaches a handler: as the answer to the discovery query, as the answer to
// the full sync's COMMIT, on the association once synced (Config and Query
// responses, heartbeats, teardowns), or on the low-priority channel (events,
// packet redirects). Invariants: no panic; the association either ends or
// still answers a heartbeat; the CE's loop still answers; no FE port
// address the guard refuses reaches the RIB.

// Where the fuzzed message goes.
const (
	fuzzAsDiscovery = iota
	fuzzAsCommitAnswer
	fuzzOnHigh
	fuzzOnLow
	fuzzPlaces
)

const (
	fuzzFE    = 3
	fuzzCE    = 7
	fuzzStall = 5 * time.Second // no answer within this is a stall
)

var (
	fuzzOnce sync.Once
	fuzzCEv  *CE
)

// fuzzTarget is the CE every input is played against, started once per
// process (its loop keeps running between inputs, as a CE's does).
func fuzzTarget(t testing.TB) *CE {
	fuzzOnce.Do(func() {
		cfg := baseConfig()
		cfg.SyncHold = time.Millisecond
		cfg.FEHoldTime = time.Millisecond
		cfg.StaticRoutes = append(cfg.StaticRoutes, StaticRoute{Prefix: "198.51.100.0/24", NextHops: []string{"10.1.1.1"}})
		log := slog.New(slog.DiscardHandler)
		if os.Getenv("FUZZ_CE_LOG") != "" {
			log = slog.New(slog.NewTextHandler(os.Stderr, nil))
		}
		c, err := New(cfg, log)
		if err != nil {
			panic(err)
		}
		go c.Run(context.Background())
		deadline := time.Now().Add(10 * time.Second)
		for c.Addr() == nil && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		<-c.Converged()
		fuzzCEv = c
	})
	if fuzzCEv == nil {
		t.Fatal("the CE did not start")
	}
	return fuzzCEv
}

// frame makes raw a message the CE's reader takes whole: version 1, a
// Length that matches, and (if fix) the FE's and CE's IDs, so it reaches the
// handlers instead of being dropped as misaddressed.
func frame(raw []byte, fix bool, corr uint64) []byte {
	b := make([]byte, max(forces.HeaderLen, (len(raw)+3)&^3))
	copy(b, raw)
	if len(b) > forces.MaxMessageLen {
		b = b[:forces.MaxMessageLen]
	}
	b[0] = forces.ProtocolVersion<<4 | b[0]&0x0F
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)/4))
	if fix {
		binary.BigEndian.PutUint32(b[4:], uint32(forces.FEID(fuzzFE)))
		binary.BigEndian.PutUint32(b[8:], uint32(forces.CEID(fuzzCE)))
	}
	if corr != 0 {
		binary.BigEndian.PutUint64(b[12:], corr)
	}
	return b
}

// fuzzFEPlayer is the FE end of one input's association. Its writes go
// through a queue, as a socket buffer would take them: net.Pipe has none,
// and an FE writing while the CE writes to it would otherwise deadlock.
type fuzzFEPlayer struct {
	c    *CE
	conn *forces.Conn
	nc   net.Conn
	out  chan []byte
}

func newFuzzFEPlayer(c *CE, nc net.Conn) *fuzzFEPlayer {
	p := &fuzzFEPlayer{c: c, conn: forces.NewConn(nc), nc: nc, out: make(chan []byte, 256)}
	go func() {
		for b := range p.out {
			if _, err := nc.Write(b); err != nil {
				for range p.out { // drain: the connection is gone
				}
				return
			}
		}
	}()
	return p
}

// send queues raw bytes (a framed message) for the CE.
func (p *fuzzFEPlayer) send(b []byte) {
	select {
	case p.out <- b:
	default: // the CE reads nothing: more would change nothing
	}
}

// write queues a message for the CE.
func (p *fuzzFEPlayer) write(m *forces.Message) {
	if b, err := m.MarshalBinary(); err == nil {
		p.send(b)
	}
}

func (p *fuzzFEPlayer) read() (*forces.Message, error) {
	p.nc.SetReadDeadline(time.Now().Add(fuzzStall))
	return p.conn.ReadMessage()
}

// answer answers the CE's discovery query as a routing FE with one port.
func (p *fuzzFEPlayer) answer(q *forces.Message) error {
	resp, err := forces.NewQueryResponse(q, func(it forces.Item) ([]byte, forces.ResultCode) {
		switch {
		case it.ClassID == forces.ClassFEObject && it.Path[0] == forces.FEObjectSupportedLFBs:
			b, _ := forces.MarshalSupportedLFBs(routingLFBs)
			return b, forces.ResultSuccess
		case it.ClassID == forces.PortTableClass:
			b, _ := forces.MarshalPortInfos([]forces.PortInfo{{ID: 1, Name: "p1", Up: true, Addrs: []netip.Prefix{netip.MustParsePrefix("172.16.9.1/24")}}})
			return b, forces.ResultSuccess
		}
		return nil, forces.ResultComponentDoesNotExist
	})
	if err != nil {
		return err
	}
	p.write(resp)
	return nil
}

// errEnded: the CE ended the association (a teardown or a close), which is
// a fine answer to a bad message.
var errEnded = errors.New("association ended")

// untilSynced plays the FE through discovery and the full sync, placing
// msg as the place says. It returns errEnded if the CE ends the association.
func (p *fuzzFEPlayer) untilSynced(place int, raw []byte, fix bool) error {
	for {
		m, err := p.read()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) {
				return errEnded
			}
			return fmt.Errorf("during the sync: %w", err)
		}
		switch {
		case m.Header.Type == forces.MsgAssociationTeardown:
			return errEnded
		case m.Header.Type == forces.MsgHeartbeat && m.Header.Flags.ACK == forces.AlwaysACK:
			p.write(forces.NewHeartbeat(forces.FEID(fuzzFE), m.Header.Src, m.Header.Correlator, forces.NoACK))
		case m.Header.Type == forces.MsgQuery:
			if place == fuzzAsDiscovery {
				p.send(frame(raw, fix, m.Header.Correlator))
			}
			p.answer(m) // a stray if the fuzzed one answered it
		case m.Header.Type == forces.MsgConfig && len(m.LFBs) == 1 && len(m.LFBs[0].Ops) == 1 && m.LFBs[0].Ops[0].Type == forces.OpCommit:
			if place == fuzzAsCommitAnswer {
				p.send(frame(raw, fix, m.Header.Correlator))
			}
			if r, err := forces.NewCommitResponse(m, forces.ResultSuccess); err == nil {
				p.write(r)
			}
		case m.Header.Type == forces.MsgConfig && len(m.LFBs) == 1 && len(m.LFBs[0].Ops) == 1 && m.LFBs[0].Ops[0].Type == forces.OpTRComp:
			return nil
		}
	}
}

// alive checks that the association answers a heartbeat, or has ended.
func (p *fuzzFEPlayer) alive() error {
	const probe = 0xFEED
	p.write(forces.NewHeartbeat(forces.FEID(fuzzFE), forces.CEID(fuzzCE), probe, forces.AlwaysACK))
	for {
		m, err := p.read()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return fmt.Errorf("the association neither answered a heartbeat nor ended within %s", fuzzStall)
			}
			return nil
		}
		if m.Header.Type == forces.MsgAssociationTeardown || (m.Header.Type == forces.MsgHeartbeat && m.Header.Correlator == probe) {
			return nil
		}
		if m.Header.Type == forces.MsgHeartbeat && m.Header.Flags.ACK == forces.AlwaysACK {
			p.write(forces.NewHeartbeat(forces.FEID(fuzzFE), m.Header.Src, m.Header.Correlator, forces.NoACK))
		}
	}
}

// playFE runs one input against c and checks the invariants.
func playFE(t testing.TB, c *CE, place int, fix bool, raw []byte) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ceEnd, feEnd := net.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		c.serveFE(ctx, ceEnd, func() {})
	}()
	p := newFuzzFEPlayer(c, feEnd)
	var lowDone chan struct{}
	defer func() {
		close(p.out)
		feEnd.Close()
		for _, ch := range []chan struct{}{served, lowDone} {
			if ch == nil {
				continue
			}
			select {
			case <-ch:
			case <-time.After(fuzzStall):
				t.Fatalf("the CE's session did not end within %s of the FE closing", fuzzStall)
			}
		}
	}()
	p.write(forces.NewAssociationSetup(forces.FEID(fuzzFE), forces.CEID(0), 1))
	m, err := p.read()
	if err != nil || m.ASResult == nil || forces.SetupResult(*m.ASResult) != forces.SetupSuccess {
		t.Fatalf("setup: %v %v", m, err)
	}
	err = p.untilSynced(place, raw, fix)
	switch {
	case errors.Is(err, errEnded):
	case err != nil:
		t.Fatal(err)
	case place == fuzzOnHigh:
		p.send(frame(raw, fix, 0))
	case place == fuzzOnLow:
		lowCE, lowFE := net.Pipe()
		defer lowFE.Close()
		lowDone = make(chan struct{})
		go func() {
			defer close(lowDone)
			c.serveLow(ctx, lowCE, func() {})
		}()
		low := newFuzzFEPlayer(c, lowFE)
		defer close(low.out)
		low.write(forces.NewAssociationSetup(forces.FEID(fuzzFE), forces.CEID(fuzzCE), 1))
		if r, err := low.read(); err != nil || r.ASResult == nil || forces.SetupResult(*r.ASResult) != forces.SetupSuccess {
			t.Fatalf("low-priority setup: %v, %v", r, err)
		}
		go io.Copy(io.Discard, lowFE) // the CE may inject; nothing to check
		low.send(frame(raw, fix, 0))
	}
	if err == nil {
		if err := p.alive(); err != nil {
			t.Fatal(err)
		}
	}
	wait, cancelWait := context.WithTimeout(context.Background(), fuzzStall)
	defer cancelWait()
	st, err := c.Status(wait)
	if err != nil {
		t.Fatalf("the CE's loop: %v", err)
	}
	for _, pfx := range st.Connected {
		if why := shapeProblem(pfx); why != "" {
			t.Fatalf("connected prefix %s in the RIB: %s", pfx, why)
		}
	}
}

// fuzzSeeds are messages an FE sends, for each place.
func fuzzSeeds() [][]byte {
	fe, ce := forces.FEID(fuzzFE), forces.CEID(fuzzCE)
	enc := func(m *forces.Message) []byte {
		b, err := m.MarshalBinary()
		if err != nil {
			panic(err)
		}
		return b
	}
	port := func(addrs ...string) []byte {
		p := forces.PortInfo{ID: 1, Name: "p1", Up: true}
		for _, a := range addrs {
			p.Addrs = append(p.Addrs, netip.MustParsePrefix(a))
		}
		b, err := p.AppendFullData(nil)
		if err != nil {
			panic(err)
		}
		return b
	}
	event := func(b []byte) []byte {
		return enc(forces.NewEventNotification(fe, ce, 9, forces.PortTableClass, forces.PortTableInstance, []uint32{forces.PortTableComponent, 1}, b))
	}
	disc := forces.NewDiscoveryQuery(ce, fe, 5)
	disc.LFBs = append(disc.LFBs, forces.GetSelect(forces.PortTableClass, forces.PortTableInstance, []uint32{forces.PortTableComponent}))
	ports, _ := forces.MarshalPortInfos([]forces.PortInfo{{ID: 1, Name: "p1", Up: true, Addrs: []netip.Prefix{
		netip.MustParsePrefix("10.1.1.1/24"), netip.MustParsePrefix("127.0.0.1/8"), netip.MustParsePrefix("0.0.0.0/0")}}})
	discResp, _ := forces.NewQueryResponse(disc, func(it forces.Item) ([]byte, forces.ResultCode) {
		switch {
		case it.ClassID == forces.ClassFEObject && it.Path[0] == forces.FEObjectSupportedLFBs:
			b, _ := forces.MarshalSupportedLFBs(routingLFBs)
			return b, forces.ResultSuccess
		case it.ClassID == forces.PortTableClass:
			return ports, forces.ResultSuccess
		}
		return nil, forces.ResultComponentDoesNotExist
	})
	commit := forces.NewCommit(ce, fe, 77)
	commitOK, _ := forces.NewCommitResponse(commit, forces.ResultSuccess)
	commitNo, _ := forces.NewCommitResponse(commit, forces.ResultUnspecifiedError)
	cfg, _ := forces.BuildConfig(forces.Header{Src: ce, Dst: fe}, nil, []forces.TableOp{
		{Op: forces.OpSet, ClassID: forces.ClassIPv4NextHop, InstanceID: 1, Path: []uint32{1, 1}, FullData: []byte{1, 2, 3, 4}},
		{Op: forces.OpDel, ClassID: forces.ClassIPv4UcastLPM, InstanceID: 1, Path: []uint32{1, 2}},
	})
	cfgOK, _ := forces.NewConfigResponse(cfg[0])
	cfgNo, _ := forces.NewConfigResponse(cfg[0], forces.ResultUnspecifiedError)
	redirect := forces.NewPacketRedirect(fe, ce, 3, forces.Redirect{Metadata: []forces.Metadata{forces.PortMetadata(1)}, Data: make([]byte, 64)})
	return [][]byte{
		enc(discResp),
		enc(commitOK), enc(commitNo),
		enc(cfgOK), enc(cfgNo),
		enc(forces.NewHeartbeat(fe, ce, 1, forces.AlwaysACK)),
		enc(forces.NewAssociationTeardown(fe, ce, uint32(forces.TeardownLossOfHeartbeats))),
		event(port("172.16.9.1/24")),
		event(port("10.1.1.1/24", "172.16.9.1/24")),
		event(port("::1/128", "2001:db8:9::1/64")),
		event([]byte{0, 0, 0, 1}),
		enc(redirect),
		{0x10, 0x13, 0, 6},                  // a header, nothing else
		hostileQueryResponse(12, 1, 1),      // nested deeper than forces.MaxPathDepth
		hostileQueryResponse(2, 4000, 3000), // a long prefix over many leaves
	}
}

// hostileQueryResponse encodes, past the encoder's checks, a Query
// Response whose one PATH-DATA chain is depth levels deep, the first
// holding ids IDs, the last leaves children.
func hostileQueryResponse(depth, ids, leaves int) []byte {
	tlv := func(typ uint16, val []byte) []byte {
		b := binary.BigEndian.AppendUint16(nil, typ)
		b = binary.BigEndian.AppendUint16(b, uint16(4+len(val)))
		b = append(b, val...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return b
	}
	path := func(n int, inside []byte) []byte {
		v := binary.BigEndian.AppendUint32(nil, uint32(n))
		for i := range n {
			v = binary.BigEndian.AppendUint32(v, uint32(i+1))
		}
		return tlv(forces.TLVPathData, append(v, inside...))
	}
	var p []byte
	for range leaves {
		p = append(p, path(0, nil)...)
	}
	for d := depth; d > 1; d-- {
		p = path(1, p)
	}
	p = path(ids, p)
	sel := tlv(forces.TLVLFBSelect, append(binary.BigEndian.AppendUint64(nil, uint64(forces.PortTableClass)<<32|uint64(forces.PortTableInstance)),
		tlv(uint16(forces.OpGetResponse), p)...))
	m := make([]byte, forces.HeaderLen, forces.HeaderLen+len(sel))
	m[1] = byte(forces.MsgQueryResponse)
	return append(m, sel...)
}

func FuzzCEHandlesFEMessages(f *testing.F) {
	for _, s := range fuzzSeeds() {
		for place := range fuzzPlaces {
			f.Add(uint8(place), true, s)
		}
	}
	f.Add(uint8(fuzzOnHigh), false, fuzzSeeds()[3])
	f.Fuzz(func(t *testing.T, place uint8, fix bool, raw []byte) {
		if len(raw) > 64<<10 {
			return
		}
		playFE(t, fuzzTarget(t), int(place%fuzzPlaces), fix, raw)
	})
}
