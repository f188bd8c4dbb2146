package lab

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/nsthread"
)

// The fake FE: a ForCES client that dials the lab's CE as an FE would, with
// or without a certificate, and then says what an FE never should.

// SpareFE is the FE ID an attack lab's CE admits and has a certificate for
// (Options.Attackable) though no FE of the lab runs it: the suite's
// compromised FE. NotAllowedFE has a certificate from the lab's CA too but
// is not on the CE's list.
const (
	SpareFE      uint32 = 9
	NotAllowedFE uint32 = 8
)

// dialCE opens a TCP connection from the router's namespace to the CE's
// ForCES port (low: the low-priority channel's), from source address src
// (zero: the kernel's choice), with TLS as the certificate cert (nil: no
// TLS). rcvbuf, when not 0, shrinks the socket's receive buffer first.
func dialCE(ctx context.Context, o *Options, low bool, src netip.Addr, cert *forces.TLSConfig, rcvbuf int) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(o.forcesAddr())
	if err != nil {
		return nil, err
	}
	if low {
		ap = netip.AddrPortFrom(ap.Addr(), ap.Port()+2)
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	if src.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: src.AsSlice()}
	}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
			})
			return errors.Join(err, serr)
		}
	}
	var nc net.Conn
	if err := nsthread.Run(o.Namespace("rtr"), func() error {
		var err error
		nc, err = d.DialContext(ctx, "tcp", ap.String())
		return err
	}); err != nil {
		return nil, err
	}
	if cert == nil {
		return nc, nil
	}
	cfg, err := cert.ClientTLS("ce")
	if err != nil {
		nc.Close()
		return nil, err
	}
	tc := tls.Client(nc, cfg)
	tc.SetDeadline(time.Now().Add(5 * time.Second))
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	// TLS 1.3: a server that refuses the client's certificate says so
	// after the client's handshake is done, at the first read.
	tc.SetDeadline(time.Time{})
	return tc, nil
}

// labCert is the certificate of the lab's CA issued to name.
func labCert(o *Options, name string) *forces.TLSConfig {
	return &forces.TLSConfig{
		Cert: o.Dir + "/" + name + ".crt", Key: o.Dir + "/" + name + ".key", CA: o.Dir + "/ca.crt",
	}
}

// fakeFE is one association attempt of the fake FE.
type fakeFE struct {
	nc   net.Conn
	conn *forces.Conn
	id   forces.ID
	ce   forces.ID
	// ports is what it reports in discovery.
	ports []forces.PortInfo

	mu      sync.Mutex
	configs int  // Config messages answered
	veto    bool // answer COMMITs with a failure
	done    chan struct{}
	err     error
}

func newFakeFE(nc net.Conn, id uint32) *fakeFE {
	return &fakeFE{nc: nc, conn: forces.NewConn(nc), id: forces.FEID(id), done: make(chan struct{})}
}

// setup sends an Association Setup and waits for the answer: nil if the CE
// admitted it, an error saying how it was refused otherwise.
func (f *fakeFE) setup() error {
	f.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if err := f.conn.WriteMessage(forces.NewAssociationSetup(f.id, forces.CEID(0), 1)); err != nil {
		return fmt.Errorf("send setup: %w", err)
	}
	f.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer f.conn.SetReadDeadline(time.Time{})
	m, err := f.conn.ReadMessage()
	if err != nil {
		return fmt.Errorf("no setup response: %w", err)
	}
	if m.Header.Type != forces.MsgAssociationSetupResponse || m.ASResult == nil {
		return fmt.Errorf("got %s, not a setup response", m.Header.Type)
	}
	if r := forces.SetupResult(*m.ASResult); r != forces.SetupSuccess {
		return fmt.Errorf("setup refused: %s", r)
	}
	f.ce = m.Header.Src
	return nil
}

// serve plays a well-behaved FE (heartbeats, discovery, Configs answered
// with success) until the connection ends, in the background.
func (f *fakeFE) serve() {
	go func() {
		defer close(f.done)
		for {
			m, err := f.conn.ReadMessage()
			if err != nil {
				f.err = err
				return
			}
			if err := f.answer(m); err != nil {
				f.err = err
				return
			}
		}
	}()
}

func (f *fakeFE) answer(m *forces.Message) error {
	switch m.Header.Type {
	case forces.MsgHeartbeat:
		if m.Header.Flags.ACK == forces.AlwaysACK {
			return f.conn.WriteMessage(forces.NewHeartbeat(f.id, m.Header.Src, m.Header.Correlator, forces.NoACK))
		}
	case forces.MsgQuery:
		resp, err := forces.NewQueryResponse(m, f.query)
		if err != nil {
			return err
		}
		return f.conn.WriteMessage(resp)
	case forces.MsgConfig:
		f.mu.Lock()
		f.configs++
		f.mu.Unlock()
		if len(m.LFBs) == 1 && len(m.LFBs[0].Ops) == 1 {
			switch m.LFBs[0].Ops[0].Type {
			case forces.OpCommit:
				f.mu.Lock()
				code := forces.ResultSuccess
				if f.veto {
					code = forces.ResultUnspecifiedError
				}
				f.mu.Unlock()
				resp, err := forces.NewCommitResponse(m, code)
				if err != nil {
					return err
				}
				return f.conn.WriteMessage(resp)
			case forces.OpTRComp:
				return nil
			}
		}
		if m.Header.Flags.ACK == forces.NoACK {
			return nil
		}
		resp, err := forces.NewConfigResponse(m)
		if err != nil {
			return err
		}
		return f.conn.WriteMessage(resp)
	case forces.MsgAssociationTeardown:
		return io.EOF
	}
	return nil
}

// query answers discovery as an FE with the routing LFBs and f.ports.
func (f *fakeFE) query(it forces.Item) ([]byte, forces.ResultCode) {
	switch {
	case it.ClassID == forces.ClassFEObject && len(it.Path) > 0 && it.Path[0] == forces.FEObjectSupportedLFBs:
		b, err := forces.MarshalSupportedLFBs([]forces.SupportedLFB{
			{Name: "IPv4UcastLPM", ClassID: forces.ClassIPv4UcastLPM, Version: "1.0"},
			{Name: "IPv4NextHop", ClassID: forces.ClassIPv4NextHop, Version: "1.0"},
		})
		if err != nil {
			return nil, forces.ResultInternalError
		}
		return b, forces.ResultSuccess
	case it.ClassID == forces.ClassFEObject && len(it.Path) > 0 && it.Path[0] == forces.FEObjectFEName:
		return []byte("intruder"), forces.ResultSuccess
	case it.ClassID == forces.PortTableClass && len(it.Path) > 0 && it.Path[0] == forces.PortTableComponent:
		b, err := forces.MarshalPortInfos(f.ports)
		if err != nil {
			return nil, forces.ResultInternalError
		}
		return b, forces.ResultSuccess
	}
	return nil, forces.ResultComponentDoesNotExist
}

// synced waits until the CE has sent it a Config (the full sync).
func (f *fakeFE) synced(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		n := f.configs
		f.mu.Unlock()
		if n > 0 {
			return nil
		}
		select {
		case <-f.done:
			return fmt.Errorf("association ended: %v", f.err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return errors.New("no Config from the CE")
}

func (f *fakeFE) close() {
	f.nc.Close()
	<-f.done
}

// refusedBy reports whether a connection is refused within timeout: closed
// by the other end, or answered with a refusal, with no successful setup.
func refused(f *fakeFE) (string, error) {
	err := f.setup()
	f.nc.Close()
	if err == nil {
		return "", errors.New("the CE admitted it")
	}
	return err.Error(), nil
}

// associate dials the CE as FE id with the lab's certificate for it and
// plays a well-behaved FE that reports ports, until the full sync arrived.
func associate(ctx context.Context, r *attackRun, id uint32, ports []forces.PortInfo) (*fakeFE, error) {
	var f *fakeFE
	var last error
	for range 20 { // the CE may not have freed the ID of the last attack yet
		nc, err := dialCE(ctx, &r.o, false, netip.Addr{}, labCert(&r.o, certName(id)), 0)
		if err != nil {
			return nil, err
		}
		f = newFakeFE(nc, id)
		f.ports = ports
		if last = f.setup(); last == nil {
			break
		}
		nc.Close()
		time.Sleep(500 * time.Millisecond)
	}
	if last != nil {
		return nil, fmt.Errorf("the spare FE %d cannot associate: %w", id, last)
	}
	f.serve()
	if err := f.synced(10 * time.Second); err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

// pathBomb is a Message of about 256 KiB whose PATH-DATAs (one per
// LFB select, each TLV near its 64 KiB limit) have a long path and
// thousands of small children: flattening it into items by copying the
// parent's path into every leaf costs over 300 MiB.
func pathBomb(h forces.Header, op forces.OpType, class uint32) *forces.Message {
	m := &forces.Message{Header: h}
	for range 4 {
		parent := forces.PathData{IDs: make([]uint32, 7900)}
		for i := range parent.IDs {
			parent.IDs[i] = 1
		}
		parent.Children = make([]forces.PathData, 2600)
		for i := range parent.Children {
			parent.Children[i] = forces.PathData{IDs: []uint32{uint32(i)}}
		}
		m.LFBs = append(m.LFBs, forces.LFBSelect{ClassID: class, InstanceID: 1,
			Ops: []forces.Operation{{Type: op, Paths: []forces.PathData{parent}}}})
	}
	return m
}

// fdCount is how many file descriptors a process has open.
func fdCount(pid int) int {
	es, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	return len(es)
}
