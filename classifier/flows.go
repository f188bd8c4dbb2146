package classifier

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Flow is a control flow of the router: a TCP connection of the router's own
// (a BGP session, a ForCES association, a management session), as its return
// packets arrive: from Remote to Local.
type Flow struct {
	Kind   string         // "bgp", "forces", "api", "ssh", ... (from the port that matched)
	Local  netip.AddrPort // the router's end
	Remote netip.AddrPort // the peer's end
}

// String shows a flow the way its packets go: "bgp 10.0.0.1:179<-10.0.0.2:40000".
func (f Flow) String() string { return fmt.Sprintf("%s %s<-%s", f.Kind, f.Local, f.Remote) }

// Config says which connections are control flows: a connection whose local
// or remote port is in Ports (port -> kind) and whose state is established (or
// SYN_SENT: a session the router is opening). Half-open connections the
// router answered (SYN_RECV) are not: a spoofed SYN makes one, and a SYN flood
// would fill the rule table with flows steered past the policer.
type Config struct {
	// Ports maps a TCP port to the kind of control flow it marks. When both
	// ends' ports are in it, the local port's kind wins. Empty: DefaultPorts.
	Ports map[uint16]string
	// Interval is how often Watch reads the sockets; zero means
	// DefaultInterval.
	Interval time.Duration
	// IncludeLoopback also reports connections whose two ends are both
	// loopback addresses. They are left out by default: their packets never
	// arrive on a port, so there is nothing to steer.
	IncludeLoopback bool
}

// DefaultPorts returns the ports a Config without Ports watches: 179 bgp,
// 6700 and 6702 forces (the ForCES TML's two channels), 22 ssh. Each call
// returns a new map, which the caller may change.
func DefaultPorts() map[uint16]string {
	return map[uint16]string{
		179:  "bgp",
		6700: "forces",
		6702: "forces",
		22:   "ssh",
	}
}

// DefaultInterval is how often Watch reads the sockets unless told otherwise.
const DefaultInterval = 200 * time.Millisecond

// ErrBadConfig is returned, wrapped, for a Config that cannot be used.
var ErrBadConfig = errors.New("classifier: bad config")

// Watch reads the TCP sockets of the calling thread's network namespace every
// Interval (IPv4 and IPv6, via netlink sock_diag, no /proc parsing) and calls
// onChange with the flows that appeared and those that went since the last
// call (first call: all current flows, possibly none), until ctx ends. It
// never keys a rule on "port 179 from anywhere": every Flow is a real
// connection's exact 5-tuple (TCP).
//
// The namespace is fixed when Watch is called: it opens one netlink socket
// there and uses it for every read, so the goroutine may later run on any
// thread. onChange runs on Watch's goroutine, is called only when something
// changed (after the first call), and owns the slices it is given. Watch
// returns nil when ctx ends and an error when the sockets cannot be read; it
// does not report the flows as removed when it stops.
//
// Cost per interval: one sock_diag dump per family, that is two
// request/response exchanges on one netlink socket. The kernel walks its
// established-connections hash table (not the listening one: the dump asks
// only for ESTABLISHED and SYN_SENT) and, through a port filter in
// bytecode, copies out only the control connections, without tcp_info; so the
// reply grows with the number of control flows, not with the host's sockets.
// The walk visits every bucket of the table, which all namespaces share and
// whose size the kernel logs at boot ("TCP established hash table entries").
// Measured on the 2-core development machine (262144 buckets): about 0.5 ms a
// round with few sockets (BenchmarkFlows), 2 ms with 10,000 other connections
// in the namespace (11 ms without the port filter); at the default 200 ms
// interval, 0.25% to 1% of one core.
func Watch(ctx context.Context, cfg Config, onChange func(added, removed []Flow)) error {
	d, err := newDumper(cfg)
	if err != nil {
		return err
	}
	interval := cmp.Or(cfg.Interval, DefaultInterval)
	if ctx.Err() != nil {
		return nil
	}
	if err := d.open(); err != nil {
		return err
	}
	defer d.close()

	cur, err := d.flows()
	if err != nil {
		return err
	}
	onChange(slices.Clone(cur), nil)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		next, err := d.flows()
		if errors.Is(err, netlink.ErrDumpInterrupted) {
			continue // the sockets changed under every read; try again next tick
		}
		if err != nil {
			return err
		}
		added, removed := diff(cur, next)
		if len(added) > 0 || len(removed) > 0 {
			onChange(added, removed)
		}
		cur = next
	}
}

// Flows returns the current control flows once (what Watch would report
// first), sorted by Local then Remote.
func Flows(cfg Config) ([]Flow, error) {
	d, err := newDumper(cfg)
	if err != nil {
		return nil, err
	}
	return d.flows()
}

// diff returns what is in next and not in cur, and what is in cur and not in
// next; both inputs and outputs are sorted.
func diff(cur, next []Flow) (added, removed []Flow) {
	in := func(s []Flow, f Flow) bool {
		_, ok := slices.BinarySearchFunc(s, f, compareFlows)
		return ok
	}
	for _, f := range next {
		if !in(cur, f) {
			added = append(added, f)
		}
	}
	for _, f := range cur {
		if !in(next, f) {
			removed = append(removed, f)
		}
	}
	return added, removed
}

func compareFlows(a, b Flow) int {
	return cmp.Or(a.Local.Compare(b.Local), a.Remote.Compare(b.Remote), cmp.Compare(a.Kind, b.Kind))
}

// TCP states as the kernel numbers them (include/net/tcp_states.h).
const (
	tcpEstablished = 1
	tcpSynSent     = 2
	tcpSynRecv     = 3
)

// controlStates are the states of a live session or one the router is
// opening; the others (closing, closed, listening) carry no session worth
// steering, and SYN_RECV is what anyone with a spoofed SYN can create (the
// final ACK of a peer's connection is policed instead, and its rule comes
// with ESTABLISHED, a poll later).
const controlStates = 1<<tcpEstablished | 1<<tcpSynSent

// dumper reads the control flows of one network namespace.
type dumper struct {
	ports    map[uint16]string
	loopback bool
	filter   []byte // port filter bytecode; nil: filter in Go only
	// sockets holds Watch's netlink socket; nil makes every dump open (in
	// the calling thread's namespace) and close a socket of its own.
	sockets map[int]*nl.SocketHandle
}

func newDumper(cfg Config) (*dumper, error) {
	ports := cfg.Ports
	if len(ports) == 0 {
		ports = DefaultPorts()
	}
	if cfg.Interval < 0 {
		return nil, fmt.Errorf("%w: negative interval %v", ErrBadConfig, cfg.Interval)
	}
	for p, kind := range ports {
		if p == 0 || kind == "" {
			return nil, fmt.Errorf("%w: port %d kind %q: want a port above 0 and a kind", ErrBadConfig, p, kind)
		}
	}
	ports = maps.Clone(ports) // the caller may change its map while Watch runs
	return &dumper{
		ports:    ports,
		loopback: cfg.IncludeLoopback,
		filter:   portFilter(slices.Sorted(maps.Keys(ports))),
	}, nil
}

// open gives the dumper a socket of its own in the calling thread's network
// namespace.
func (d *dumper) open() error {
	s, err := nl.GetNetlinkSocketAt(netns.None(), netns.None(), unix.NETLINK_INET_DIAG)
	if err != nil {
		return fmt.Errorf("classifier: sock_diag socket: %w", err)
	}
	tv := unix.NsecToTimeval((5 * time.Second).Nanoseconds()) // the kernel answers a dump at once; never hang on it
	if err := s.SetSendTimeout(&tv); err != nil {
		s.Close()
		return fmt.Errorf("classifier: sock_diag socket: %w", err)
	}
	if err := s.SetReceiveTimeout(&tv); err != nil {
		s.Close()
		return fmt.Errorf("classifier: sock_diag socket: %w", err)
	}
	d.sockets = map[int]*nl.SocketHandle{unix.NETLINK_INET_DIAG: {Socket: s}}
	return nil
}

func (d *dumper) close() {
	for _, sh := range d.sockets {
		sh.Close()
	}
	d.sockets = nil
}

// flows reads both families and returns the control flows, deduplicated and
// sorted. A dump the kernel marks as interrupted is read again, a few times.
func (d *dumper) flows() ([]Flow, error) {
	var err error
	for range 3 {
		var out []Flow
		keep := func(s diagSocket) {
			if f, ok := d.flow(s); ok {
				out = append(out, f)
			}
		}
		if err = d.dump(unix.AF_INET, keep); err != nil {
			continue
		}
		if err = d.dump(unix.AF_INET6, keep); err != nil {
			continue
		}
		slices.SortFunc(out, compareFlows)
		return slices.Compact(out), nil
	}
	return nil, err
}

// flow says whether the socket is a control flow, and which.
func (d *dumper) flow(s diagSocket) (Flow, bool) {
	if controlStates&(1<<s.state) == 0 {
		return Flow{}, false
	}
	if !s.local.IsValid() || !s.remote.IsValid() || s.remote.Port() == 0 || s.remote.Addr().IsUnspecified() {
		return Flow{}, false
	}
	if !d.loopback && s.local.Addr().IsLoopback() && s.remote.Addr().IsLoopback() {
		return Flow{}, false
	}
	kind, ok := d.ports[s.local.Port()]
	if !ok {
		if kind, ok = d.ports[s.remote.Port()]; !ok {
			return Flow{}, false
		}
	}
	return Flow{Kind: kind, Local: s.local, Remote: s.remote}, true
}

// dump asks the kernel for the TCP sockets of one family in the control
// states (and, with the filter, on the control ports) and passes each to fn.
func (d *dumper) dump(family uint8, fn func(diagSocket)) error {
	req := nl.NewNetlinkRequest(nl.SOCK_DIAG_BY_FAMILY, unix.NLM_F_DUMP)
	req.Sockets = d.sockets
	req.AddData(diagRequest{family: family, states: controlStates})
	if d.filter != nil {
		req.AddData(nl.NewRtAttr(inetDiagReqBytecode, d.filter))
	}
	var perr error
	err := req.ExecuteIter(unix.NETLINK_INET_DIAG, nl.SOCK_DIAG_BY_FAMILY, func(msg []byte) bool {
		s, err := parseDiagMsg(msg)
		if err != nil {
			perr = err
			return false
		}
		fn(s)
		return true
	})
	if err == nil {
		err = perr
	}
	if err != nil {
		return fmt.Errorf("classifier: sock_diag dump (family %d): %w", family, err)
	}
	return nil
}

// diagRequest is struct inet_diag_req_v2 (include/uapi/linux/inet_diag.h)
// for a dump of every TCP socket of one family in the given states.
type diagRequest struct {
	family uint8
	states uint32
}

const sizeofDiagRequest = 56

func (r diagRequest) Len() int { return sizeofDiagRequest }

func (r diagRequest) Serialize() []byte {
	b := make([]byte, sizeofDiagRequest)
	b[0] = r.family
	b[1] = unix.IPPROTO_TCP
	// b[2], idiag_ext: no extensions (no tcp_info): only the 5-tuple is read.
	binary.NativeEndian.PutUint32(b[4:8], r.states)
	// The socket id stays zero: a dump matches every socket.
	return b
}

// diagSocket is what is read of one struct inet_diag_msg.
type diagSocket struct {
	state         uint8
	local, remote netip.AddrPort
}

const sizeofDiagMsg = 72

// parseDiagMsg reads an inet_diag_msg; IPv4-mapped IPv6 addresses (a dual
// stack socket talking IPv4) come out as IPv4.
func parseDiagMsg(b []byte) (diagSocket, error) {
	if len(b) < sizeofDiagMsg {
		return diagSocket{}, fmt.Errorf("inet_diag_msg of %d bytes, want %d", len(b), sizeofDiagMsg)
	}
	addr := func(a []byte) (netip.Addr, error) {
		switch b[0] {
		case unix.AF_INET:
			return netip.AddrFrom4([4]byte(a[:4])), nil
		case unix.AF_INET6:
			return netip.AddrFrom16([16]byte(a[:16])).Unmap(), nil
		}
		return netip.Addr{}, fmt.Errorf("inet_diag_msg of family %d", b[0])
	}
	src, err := addr(b[8:24])
	if err != nil {
		return diagSocket{}, err
	}
	dst, err := addr(b[24:40])
	if err != nil {
		return diagSocket{}, err
	}
	return diagSocket{
		state:  b[1],
		local:  netip.AddrPortFrom(src, binary.BigEndian.Uint16(b[4:6])),
		remote: netip.AddrPortFrom(dst, binary.BigEndian.Uint16(b[6:8])),
	}, nil
}

// Bytecode of the kernel's socket filter (include/uapi/linux/inet_diag.h,
// run by inet_diag_bc_run).
const (
	inetDiagReqBytecode = 1 // INET_DIAG_REQ_BYTECODE

	bcJmp = 1  // INET_DIAG_BC_JMP: always takes the "no" branch
	bcSEq = 11 // INET_DIAG_BC_S_EQ: local port equals the next op's "no"
	bcDEq = 12 // INET_DIAG_BC_D_EQ: remote port equals the next op's "no"

	// bcCheck is one port test: the comparison, its operand, and a jump to
	// the end taken on a match.
	bcCheck = 12
)

// portFilter compiles "local or remote port is one of ports" for the kernel,
// so that a dump copies out only the control connections. Each op is
// {code u8, yes u8, no u16}: a true op moves yes bytes on, a false one no
// bytes; the socket matches when the program ends exactly at its last byte and
// is dropped when it jumps 4 bytes past it. Matches jump through a JMP op
// because its "no" offset, 16 bits, reaches the end where an 8-bit "yes" could
// not. It returns nil (filter in Go only) when there are too many ports.
func portFilter(ports []uint16) []byte {
	n := 2 * len(ports)
	total := n * bcCheck
	if n == 0 || total > 0xffff-4 {
		return nil
	}
	b := make([]byte, 0, total)
	op := func(code, yes uint8, no uint16) {
		b = append(b, code, yes)
		b = binary.NativeEndian.AppendUint16(b, no)
	}
	i := 0
	for _, p := range ports {
		for _, code := range []uint8{bcSEq, bcDEq} {
			left := total - i*bcCheck // bytes from this check to the end
			no := uint16(bcCheck)     // no match: the next check
			if i == n-1 {
				no = uint16(left + 4) // no match and none left: drop
			}
			op(code, 8, no)
			op(0, 0, p)
			op(bcJmp, 4, uint16(left-8)) // matched: to the end
			i++
		}
	}
	return b
}
