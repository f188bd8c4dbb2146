package ce

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/splitplane/splitplane/forces"
)

// The CE's guard on its ForCES ports: which FEs are admitted (forces_allowed_fes,
// the certificate's FE name, loopback-only without TLS), how many connections
// may be waiting for their setup, how the accept loop survives errors, and
// which port addresses an FE may report. Everything refused is counted by
// reason (splitplane_ce_forces_refused_total) and logged at most once a
// second per reason.

// refusal is why the CE refused a connection, an association, a message or
// a reported address.
type refusal uint8

const (
	refusePendingLimit    refusal = iota // too many connections waiting for their setup
	refusePendingSource                  // too many of them from one address
	refuseAcceptError                    // Accept failed (EMFILE, say); retried after a pause
	refuseNoSetup                        // no Association Setup within the setup timeout, or garbage
	refuseFEID                           // FE ID 0, or a source that is not an FE ID
	refuseDestination                    // a setup addressed to another CE
	refuseNotAllowed                     // an FE ID outside forces_allowed_fes
	refuseCertificate                    // a certificate not bound to the FE ID
	refuseInUse                          // the FE ID is associated already
	refuseLowUnassociated                // a low-priority channel for an FE that is not associated
	refuseLowIdentity                    // a low-priority channel from another identity than the association's
	refuseStrayResponse                  // a response nothing waits for (wrong correlator)
	refusePortAddress                    // a port address the FE may not claim
	nRefusals
)

var refusalNames = [nRefusals]string{
	"pending_limit", "pending_per_source", "accept_error", "no_setup", "fe_id_invalid", "wrong_destination",
	"fe_id_not_allowed", "certificate_mismatch", "fe_id_in_use", "low_not_associated", "low_identity_mismatch",
	"stray_response", "port_address",
}

func (r refusal) String() string { return refusalNames[r] }

// refusals counts what was refused, by reason, and rate-limits the logging.
type refusals struct {
	counts [nRefusals]atomic.Uint64
	logs   [nRefusals]forces.RateLog
}

// refuse counts a refusal and logs it (at most once a second per reason).
func (c *CE) refuse(r refusal, msg string, args ...any) {
	c.refused.counts[r].Add(1)
	c.refused.logs[r].Warn(c.log, msg, append(args, "reason", r.String())...)
}

// refusedCounts returns the counts by reason name, every reason present.
func (c *CE) refusedCounts() map[string]uint64 {
	out := make(map[string]uint64, nRefusals)
	for r := range nRefusals {
		out[r.String()] = c.refused.counts[r].Load()
	}
	return out
}

// Limits on connections that have not completed their association setup:
// beyond them a new connection is closed at once.
const (
	maxPendingConns     = 64
	maxPendingPerSource = 8
)

// pendingConns counts the connections waiting for their setup, in total
// and per source address.
type pendingConns struct {
	mu    sync.Mutex
	total int
	per   map[netip.Addr]int
}

func (p *pendingConns) acquire(ip netip.Addr) (refusal, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.total >= maxPendingConns {
		return refusePendingLimit, false
	}
	if p.per[ip] >= maxPendingPerSource {
		return refusePendingSource, false
	}
	if p.per == nil {
		p.per = map[netip.Addr]int{}
	}
	p.total++
	p.per[ip]++
	return 0, true
}

func (p *pendingConns) release(ip netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total--
	if p.per[ip]--; p.per[ip] <= 0 {
		delete(p.per, ip)
	}
}

// remoteIP is a connection's peer address (the zero Addr if it has none).
func remoteIP(nc net.Conn) netip.Addr {
	if ap, err := netip.ParseAddrPort(nc.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// Accept error backoff, as net/http's: 5 ms doubling up to a second.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// accept serves every connection on l with serve until ctx is done. It never
// gives up while ctx lives: an Accept error (out of file descriptors, say)
// is counted, logged at a bounded rate and retried after a pause that
// doubles while they last. Connections still waiting for their setup are
// capped (maxPendingConns, maxPendingPerSource); serve calls release once
// its connection's setup is done, and it is called when serve returns.
func (c *CE) accept(ctx context.Context, l net.Listener, wg *sync.WaitGroup, serve func(ctx context.Context, nc net.Conn, release func())) {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var delay time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, net.ErrClosed) {
				c.log.Error("forces: listener closed", "address", l.Addr().String(), "err", err)
				return
			}
			delay = min(max(2*delay, acceptBackoffMin), acceptBackoffMax)
			c.refuse(refuseAcceptError, "forces: accept failed; retrying", "address", l.Addr().String(), "err", err, "retry_in", delay)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		delay = 0
		ip := remoteIP(nc)
		if r, ok := c.pending.acquire(ip); !ok {
			nc.Close()
			c.refuse(r, "forces: connection closed: too many waiting for their association setup", "remote", nc.RemoteAddr().String(),
				"limit", map[refusal]int{refusePendingLimit: maxPendingConns, refusePendingSource: maxPendingPerSource}[r])
			continue
		}
		release := sync.OnceFunc(func() { c.pending.release(ip) })
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer release()
			serve(ctx, nc, release)
		}()
	}
}

// feRange is an inclusive range of FE numbers.
type feRange struct{ lo, hi uint32 }

// parseAllowedFEs reads forces_allowed_fes: FE numbers and ranges "A-B",
// each from 1 to 0x3FFFFFFF.
func parseAllowedFEs(list []string) ([]feRange, error) {
	var out []feRange
	num := func(s string) (uint32, error) {
		n, err := strconv.ParseUint(strings.TrimSpace(s), 0, 32)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", s)
		}
		if n == 0 || n > 0x3FFFFFFF {
			return 0, fmt.Errorf("FE ID %d: must be 1 to 0x3FFFFFFF (FE ID 0 is never admitted)", n)
		}
		return uint32(n), nil
	}
	for _, e := range list {
		lo, hi, isRange := strings.Cut(e, "-")
		a, err := num(lo)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", e, err)
		}
		b := a
		if isRange {
			if b, err = num(hi); err != nil {
				return nil, fmt.Errorf("%q: %v", e, err)
			}
			if b < a {
				return nil, fmt.Errorf("%q: range ends before it starts", e)
			}
		}
		out = append(out, feRange{a, b})
	}
	return out, nil
}

// feAllowed reports whether forces_allowed_fes admits fe (any FE ID but 0
// when it is not set).
func (c *Config) feAllowed(fe forces.ID) bool {
	n := uint32(fe)
	if !fe.IsFE() || n == 0 {
		return false
	}
	if len(c.allowedFEs) == 0 {
		return true
	}
	for _, r := range c.allowedFEs {
		if n >= r.lo && n <= r.hi {
			return true
		}
	}
	return false
}

// loopbackListen reports whether a listening address is on loopback only.
func loopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// identity says who is at the other end of a connection whose setup has
// been read (so a TLS handshake is done): the certificate's subject with
// TLS, the remote IP address without. It also returns the certificate.
func identity(nc net.Conn) (string, *tls.ConnectionState) {
	if tc, ok := nc.(*tls.Conn); ok {
		st := tc.ConnectionState()
		if len(st.PeerCertificates) > 0 {
			return "certificate " + st.PeerCertificates[0].Subject.String(), &st
		}
		return "certificate (none)", &st
	}
	return "address " + remoteIP(nc).String(), nil
}

// admit decides whether the Association Setup m, read from nc, may go on:
// its source is an FE ID other than 0 that forces_allowed_fes admits, it is
// addressed to this CE (or to CE 0 or a broadcast ID, as an FE that does not
// know the CE's ID yet sends it), and with TLS the FE's certificate is bound
// to that FE ID (forces.FECertName).
func (c *CE) admit(nc net.Conn, m *forces.Message) (refusal, forces.SetupResult, error) {
	src, dst := m.Header.Src, m.Header.Dst
	if !src.IsFE() || src == 0 {
		return refuseFEID, forces.SetupFEIDInvalid, fmt.Errorf("source ID %s is not an FE ID other than 0", src)
	}
	if dst != c.id && dst != forces.CEID(0) && dst != forces.AllCEsBroadcast && dst != forces.AllBroadcast {
		return refuseDestination, forces.SetupFEIDInvalid, fmt.Errorf("setup addressed to %s, this CE is %s", dst, c.id)
	}
	if !c.cfg.feAllowed(src) {
		return refuseNotAllowed, forces.SetupPermissionDenied, fmt.Errorf("FE ID %d is not in forces_allowed_fes", uint32(src))
	}
	if _, st := identity(nc); st != nil {
		if len(st.PeerCertificates) == 0 || !forces.CertBindsFE(st.PeerCertificates[0], src) {
			var names []string
			if len(st.PeerCertificates) > 0 {
				names = st.PeerCertificates[0].DNSNames
			}
			return refuseCertificate, forces.SetupPermissionDenied,
				fmt.Errorf("the certificate's DNS names %q do not bind it to %s: want %s or %s.<domain>", names, src,
					forces.FECertName(uint32(src)), forces.FECertName(uint32(src)))
		}
	}
	return 0, forces.SetupSuccess, nil
}

// protectedAddrs are addresses no FE may report as a port's own: a
// configured BGP neighbour's (the CE would take the neighbour for one of its
// own ports and withdraw every route through it), a static route's next
// hop, and the CE's ForCES listening addresses.
type protectedAddrs map[netip.Addr]string

// setProtected recomputes the protected addresses from the configuration;
// the loop calls it again after a reload.
func (c *CE) setProtected() {
	p := protectedAddrs{}
	for _, n := range c.cfg.Neighbors {
		if a, err := netip.ParseAddr(n.Address); err == nil {
			p[a.Unmap()] = "a configured BGP neighbour's address"
		}
	}
	for _, r := range c.cfg.StaticRoutes {
		for _, nh := range r.NextHops {
			if a, err := netip.ParseAddr(nh); err == nil {
				p[a.Unmap()] = "a static route's next hop"
			}
		}
	}
	for _, l := range []string{c.cfg.ForCESListen, c.cfg.ForCESListenLow} {
		if ap, err := netip.ParseAddrPort(l); err == nil && !ap.Addr().IsUnspecified() {
			p[ap.Addr().Unmap()] = "the CE's ForCES address"
		}
	}
	c.protected.Store(&p)
}

// shapeProblem says what makes prefix unfit to be a connected prefix from
// an FE's port whatever the configuration, or "": its address and its
// network must be unicast (link-local included), not in 0.0.0.0/8, not
// IPv4-mapped, and it must be no shorter than /8 (IPv4) or /16 (IPv6).
func shapeProblem(pfx netip.Prefix) string {
	a := pfx.Addr()
	switch {
	case !pfx.IsValid():
		return "not a prefix"
	case a.Is4In6():
		return "an IPv4-mapped IPv6 address"
	case !a.IsGlobalUnicast() && !a.IsLinkLocalUnicast(), a.Is4() && a.As4()[0] == 0:
		return "not a unicast address"
	case a.Is4() && pfx.Bits() < 8, a.Is6() && pfx.Bits() < 16:
		return "a prefix shorter than /8 (IPv4) or /16 (IPv6)"
	case pfx.Masked().Addr().IsUnspecified():
		return "a prefix of the unspecified address"
	}
	return ""
}

// portAddrProblem says why an FE may not claim prefix as a port's address,
// or "" if it may.
func (c *CE) portAddrProblem(pfx netip.Prefix) string {
	if why := shapeProblem(pfx); why != "" {
		return why
	}
	if p := c.protected.Load(); p != nil {
		if what, ok := (*p)[pfx.Addr()]; ok {
			return what
		}
	}
	return ""
}

// vetPorts drops from ports the addresses the FE may not claim (counted and
// logged), so they never reach the RIB as connected prefixes. ports is
// changed in place and returned.
func (s *session) vetPorts(ports []forces.PortInfo) []forces.PortInfo {
	for i := range ports {
		p := &ports[i]
		kept := p.Addrs[:0:0]
		for _, a := range p.Addrs {
			if why := s.ce.portAddrProblem(a); why != "" {
				s.ce.refuse(refusePortAddress, "forces: FE port address refused", "fe", s.fe, "port", p.Name, "address", a.String(), "why", why)
				continue
			}
			kept = append(kept, a)
		}
		p.Addrs = kept
	}
	return ports
}
