package classifier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file is the kernel-facing half of the hardware steering path: the
// SIOCETHTOOL ioctls for n-tuple (Flow Director) rules and the RSS
// indirection table, with the structures encoded by hand in the exact layout
// of linux/ethtool.h. The offsets below are checked against the sizes and
// offsets compiled from the C header (testdata/layout.txt) and the buffers
// against those the real ethtool(8) sends (testdata/*/*.hex).

// Layout of struct ethtool_rxnfc (192 bytes on every 64-bit Linux ABI: the
// __u64 members are 8-aligned, so ring_cookie follows 4 bytes of padding and
// the struct ends with 4 more after rule_cnt). Integers are host-endian;
// addresses and ports inside the flow union are big-endian (__be32, __be16).
const (
	rxnfcCmd      = 0
	rxnfcFlowType = 4
	rxnfcData     = 8
	rxnfcFS       = 16  // struct ethtool_rx_flow_spec, 168 bytes
	rxnfcRuleCnt  = 184 // union { rule_cnt; rss_context; }
	rxnfcRuleLocs = 188 // __u32 rule_locs[] (only GRXCLSRLALL)
	rxnfcSize     = 192

	// Offsets inside struct ethtool_rx_flow_spec.
	fsFlowType   = 0
	fsH          = 4   // union ethtool_flow_union h_u, 52 bytes
	fsHExt       = 56  // struct ethtool_flow_ext h_ext, 20 bytes
	fsM          = 76  // union ethtool_flow_union m_u
	fsMExt       = 128 // struct ethtool_flow_ext m_ext
	fsRingCookie = 152 // __u64, after 4 bytes of padding
	fsLocation   = 160
	fsSize       = 168
	flowUnion    = 52
	flowExt      = 20

	// Offsets inside struct ethtool_tcpip4_spec and ethtool_tcpip6_spec.
	ip4Src, ip4Dst, ip4PSrc, ip4PDst, ip4Tos = 0, 4, 8, 10, 12
	ip6Src, ip6Dst, ip6PSrc, ip6PDst, ip6TC  = 0, 16, 32, 34, 36

	// Flow types and flags (linux/ethtool.h).
	tcpV4Flow  = 0x01
	tcpV6Flow  = 0x05
	flowExtF   = 0x80000000 // FLOW_EXT
	flowMacExt = 0x40000000 // FLOW_MAC_EXT
	flowRSS    = 0x20000000 // FLOW_RSS

	rxClsLocSpecial = 0x80000000         // GRXCLSRLCNT: the driver accepts special locations
	rxClsFlowDisc   = 0xffffffffffffffff // ring_cookie: drop
	ringCookieRing  = 0x00000000ffffffff // ETHTOOL_RX_FLOW_SPEC_RING
	ringCookieVF    = 0x000000ff00000000 // ETHTOOL_RX_FLOW_SPEC_RING_VF

	// struct ethtool_rxfh_indir { __u32 cmd, size; __u32 ring_index[]; }
	indirHeader = 8
	// struct ethtool_drvinfo: driver[32] at 4, bus_info[32] at 100, 196 bytes.
	drvinfoSize = 196
	// struct ethtool_channels: rx_count at 20, combined_count at 32, 36 bytes.
	channelsSize = 36
	// struct ethtool_sset_info { cmd; reserved; __u64 sset_mask; __u32 data[]; }
	ssetInfoData = 16
	// struct ethtool_gstrings { cmd; string_set; len; __u8 data[]; }
	gstringsData = 12
	gstringLen   = 32 // ETH_GSTRING_LEN
	ssFeatures   = 4  // ETH_SS_FEATURES
	// struct ethtool_gfeatures { cmd; size; struct { available, requested,
	// active, never_changed; } features[]; }
	gfeaturesBlocks = 8
	gfeaturesBlock  = 16
)

// LocAny as a rule's location lets the NIC (or, when the driver cannot
// choose, Insert) pick a free location: RX_CLS_LOC_ANY.
const LocAny uint32 = 0xffffffff

// ErrBadRule is returned, wrapped, for an NtupleRule that cannot be encoded.
var ErrBadRule = errors.New("classifier: bad n-tuple rule")

// ErrRuleTableFull is returned, wrapped, by Insert when every location of the
// NIC's rule table is taken.
var ErrRuleTableFull = errors.New("classifier: n-tuple rule table full")

// NtupleRule is an n-tuple rule for one TCP flow as its packets arrive: Src
// is the peer, Dst the router. Addresses and ports are matched exactly (all
// mask bits set): NICs such as the 82599 share one mask among all rules of a
// flow type, so exact matches never conflict with each other.
type NtupleRule struct {
	Loc   uint32 // rule index in the NIC's table, or LocAny
	Src   netip.AddrPort
	Dst   netip.AddrPort
	Queue uint32 // RX queue the flow is steered to (ring_cookie)
}

func (r NtupleRule) String() string {
	loc := fmt.Sprint(r.Loc)
	if r.Loc == LocAny {
		loc = "any"
	}
	return fmt.Sprintf("loc %s tcp %s -> %s queue %d", loc, r.Src, r.Dst, r.Queue)
}

// Match is the rule without its location and queue: what the rule matches.
func (r NtupleRule) Match() NtupleMatch { return NtupleMatch{Src: r.Src, Dst: r.Dst} }

// NtupleMatch is the 4-tuple of a TCP flow as its packets arrive (Src the
// peer, Dst the router); IPv4-mapped IPv6 addresses count as IPv4.
type NtupleMatch struct {
	Src, Dst netip.AddrPort
}

func (m NtupleMatch) String() string { return fmt.Sprintf("tcp %s -> %s", m.Src, m.Dst) }

// canonical unmaps IPv4-mapped addresses and drops zones, so that equal flows
// compare equal.
func (m NtupleMatch) canonical() NtupleMatch {
	c := func(ap netip.AddrPort) netip.AddrPort {
		return netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
	}
	return NtupleMatch{Src: c(m.Src), Dst: c(m.Dst)}
}

func (m NtupleMatch) validate() error {
	c := m.canonical()
	switch {
	case !c.Src.Addr().IsValid() || !c.Dst.Addr().IsValid():
		return fmt.Errorf("%w: %s: source and destination addresses are required", ErrBadRule, m)
	case c.Src.Addr().Is4() != c.Dst.Addr().Is4():
		return fmt.Errorf("%w: %s: source and destination of different families", ErrBadRule, m)
	case c.Src.Port() == 0 || c.Dst.Port() == 0:
		return fmt.Errorf("%w: %s: ports are required", ErrBadRule, m)
	}
	return nil
}

// flowSpec is struct ethtool_rx_flow_spec, unions kept as bytes.
type flowSpec struct {
	flowType   uint32
	h, m       [flowUnion]byte
	hExt, mExt [flowExt]byte
	ringCookie uint64
	location   uint32
}

// ruleSpec encodes r as an exact-match TCP flow spec.
func ruleSpec(r NtupleRule) (flowSpec, error) {
	match := r.Match()
	if err := match.validate(); err != nil {
		return flowSpec{}, err
	}
	c := match.canonical()
	fs := flowSpec{ringCookie: uint64(r.Queue), location: r.Loc}
	be := binary.BigEndian
	if c.Src.Addr().Is4() {
		fs.flowType = tcpV4Flow
		s, d := c.Src.Addr().As4(), c.Dst.Addr().As4()
		copy(fs.h[ip4Src:], s[:])
		copy(fs.h[ip4Dst:], d[:])
		be.PutUint16(fs.h[ip4PSrc:], c.Src.Port())
		be.PutUint16(fs.h[ip4PDst:], c.Dst.Port())
		for i := ip4Src; i < ip4Tos; i++ { // tos stays unmasked
			fs.m[i] = 0xff
		}
	} else {
		fs.flowType = tcpV6Flow
		s, d := c.Src.Addr().As16(), c.Dst.Addr().As16()
		copy(fs.h[ip6Src:], s[:])
		copy(fs.h[ip6Dst:], d[:])
		be.PutUint16(fs.h[ip6PSrc:], c.Src.Port())
		be.PutUint16(fs.h[ip6PDst:], c.Dst.Port())
		for i := ip6Src; i < ip6TC; i++ { // tclass stays unmasked
			fs.m[i] = 0xff
		}
	}
	return fs, nil
}

// rule decodes fs; ok is false for anything but an exact-match TCP rule
// steering to a queue of this function (no drop, no VF, no extensions, no
// RSS context): rules of other kinds are not splitplane's.
func (fs flowSpec) rule() (r NtupleRule, ok bool) {
	if fs.flowType&(flowExtF|flowMacExt|flowRSS) != 0 ||
		fs.ringCookie == rxClsFlowDisc || fs.ringCookie&^ringCookieRing != 0 {
		return NtupleRule{}, false
	}
	full := func(b []byte) bool { return !slices.ContainsFunc(b, func(x byte) bool { return x != 0xff }) }
	zero := func(b []byte) bool { return !slices.ContainsFunc(b, func(x byte) bool { return x != 0 }) }
	be := binary.BigEndian
	r = NtupleRule{Loc: fs.location, Queue: uint32(fs.ringCookie)}
	switch fs.flowType {
	case tcpV4Flow:
		if !full(fs.m[:ip4Tos]) || !zero(fs.m[ip4Tos:]) {
			return NtupleRule{}, false
		}
		r.Src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(fs.h[ip4Src:])), be.Uint16(fs.h[ip4PSrc:]))
		r.Dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(fs.h[ip4Dst:])), be.Uint16(fs.h[ip4PDst:]))
	case tcpV6Flow:
		if !full(fs.m[:ip6TC]) || !zero(fs.m[ip6TC:]) {
			return NtupleRule{}, false
		}
		r.Src = netip.AddrPortFrom(netip.AddrFrom16([16]byte(fs.h[ip6Src:])), be.Uint16(fs.h[ip6PSrc:]))
		r.Dst = netip.AddrPortFrom(netip.AddrFrom16([16]byte(fs.h[ip6Dst:])), be.Uint16(fs.h[ip6PDst:]))
	default:
		return NtupleRule{}, false
	}
	return r, true
}

// rxnfc is struct ethtool_rxnfc.
type rxnfc struct {
	cmd      uint32
	flowType uint32
	data     uint64
	fs       flowSpec
	ruleCnt  uint32 // also rss_context
	ruleLocs []uint32
}

// marshal encodes x in the kernel's layout; room is the number of rule_locs
// slots to allocate after the struct (GRXCLSRLALL).
func (x *rxnfc) marshal(room int) []byte {
	b := make([]byte, rxnfcSize+4*max(room, len(x.ruleLocs)))
	ne := binary.NativeEndian
	ne.PutUint32(b[rxnfcCmd:], x.cmd)
	ne.PutUint32(b[rxnfcFlowType:], x.flowType)
	ne.PutUint64(b[rxnfcData:], x.data)
	fs := b[rxnfcFS : rxnfcFS+fsSize]
	ne.PutUint32(fs[fsFlowType:], x.fs.flowType)
	copy(fs[fsH:], x.fs.h[:])
	copy(fs[fsHExt:], x.fs.hExt[:])
	copy(fs[fsM:], x.fs.m[:])
	copy(fs[fsMExt:], x.fs.mExt[:])
	ne.PutUint64(fs[fsRingCookie:], x.fs.ringCookie)
	ne.PutUint32(fs[fsLocation:], x.fs.location)
	ne.PutUint32(b[rxnfcRuleCnt:], x.ruleCnt)
	for i, l := range x.ruleLocs {
		ne.PutUint32(b[rxnfcRuleLocs+4*i:], l)
	}
	return b
}

// unmarshalRxnfc decodes b; rule_locs are read only for GRXCLSRLALL, up to
// rule_cnt and the room in b.
func unmarshalRxnfc(b []byte) (rxnfc, error) {
	if len(b) < rxnfcSize {
		return rxnfc{}, fmt.Errorf("ethtool_rxnfc: %d bytes, want %d", len(b), rxnfcSize)
	}
	ne := binary.NativeEndian
	x := rxnfc{
		cmd:      ne.Uint32(b[rxnfcCmd:]),
		flowType: ne.Uint32(b[rxnfcFlowType:]),
		data:     ne.Uint64(b[rxnfcData:]),
		ruleCnt:  ne.Uint32(b[rxnfcRuleCnt:]),
	}
	fs := b[rxnfcFS : rxnfcFS+fsSize]
	x.fs.flowType = ne.Uint32(fs[fsFlowType:])
	copy(x.fs.h[:], fs[fsH:])
	copy(x.fs.hExt[:], fs[fsHExt:])
	copy(x.fs.m[:], fs[fsM:])
	copy(x.fs.mExt[:], fs[fsMExt:])
	x.fs.ringCookie = ne.Uint64(fs[fsRingCookie:])
	x.fs.location = ne.Uint32(fs[fsLocation:])
	if x.cmd == unix.ETHTOOL_GRXCLSRLALL {
		n := min(int(x.ruleCnt), (len(b)-rxnfcRuleLocs)/4)
		for i := range n {
			x.ruleLocs = append(x.ruleLocs, ne.Uint32(b[rxnfcRuleLocs+4*i:]))
		}
	}
	return x, nil
}

// insertRequest is the SRXCLSRLINS buffer for r.
func insertRequest(r NtupleRule) ([]byte, error) {
	fs, err := ruleSpec(r)
	if err != nil {
		return nil, err
	}
	x := rxnfc{cmd: unix.ETHTOOL_SRXCLSRLINS, fs: fs}
	return x.marshal(0), nil
}

// deleteRequest is the SRXCLSRLDEL buffer for the rule at loc.
func deleteRequest(loc uint32) []byte {
	x := rxnfc{cmd: unix.ETHTOOL_SRXCLSRLDEL, fs: flowSpec{location: loc}}
	return x.marshal(0)
}

// ifreq is struct ifreq with the ifr_data member of its union (40 bytes).
type ifreq struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte
}

// ethtoolNIC is the NIC of a real interface, through SIOCETHTOOL on an
// AF_INET datagram socket of the network namespace it was opened in.
type ethtoolNIC struct {
	name   string
	fd     int
	size   uint32 // rule table size (GRXCLSRLCNT data)
	locAny bool   // the driver picks locations itself (RX_CLS_LOC_SPECIAL)
}

// ethtoolCmdName names an ethtool command for errors, in ethtool's words
// less the ETHTOOL_ prefix; a command it does not know is shown in hex.
func ethtoolCmdName(cmd uint32) string {
	switch cmd {
	case unix.ETHTOOL_GDRVINFO:
		return "GDRVINFO"
	case unix.ETHTOOL_GSTRINGS:
		return "GSTRINGS"
	case unix.ETHTOOL_GRXRINGS:
		return "GRXRINGS"
	case unix.ETHTOOL_GRXCLSRLCNT:
		return "GRXCLSRLCNT"
	case unix.ETHTOOL_GRXCLSRULE:
		return "GRXCLSRULE"
	case unix.ETHTOOL_GRXCLSRLALL:
		return "GRXCLSRLALL"
	case unix.ETHTOOL_SRXCLSRLDEL:
		return "SRXCLSRLDEL"
	case unix.ETHTOOL_SRXCLSRLINS:
		return "SRXCLSRLINS"
	case unix.ETHTOOL_GSSET_INFO:
		return "GSSET_INFO"
	case unix.ETHTOOL_GRXFHINDIR:
		return "GRXFHINDIR"
	case unix.ETHTOOL_SRXFHINDIR:
		return "SRXFHINDIR"
	case unix.ETHTOOL_GFEATURES:
		return "GFEATURES"
	case unix.ETHTOOL_GCHANNELS:
		return "GCHANNELS"
	}
	return fmt.Sprintf("%#x", cmd)
}

// ioctl sends buf (a struct starting with its __u32 cmd) to the driver; the
// kernel writes its answer back into buf. Errors wrap the errno, so
// errors.Is(err, errors.ErrUnsupported) holds for EOPNOTSUPP.
func (n *ethtoolNIC) ioctl(buf []byte) error {
	var ifr ifreq
	copy(ifr.name[:unix.IFNAMSIZ-1], n.name)
	ifr.data = unsafe.Pointer(&buf[0])
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(n.fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(buf)
	if errno != 0 {
		name := ethtoolCmdName(binary.NativeEndian.Uint32(buf))
		return fmt.Errorf("ethtool %s on %s: %w", name, n.name, errno)
	}
	return nil
}

func (n *ethtoolNIC) rxnfc(x rxnfc, room int) (rxnfc, error) {
	b := x.marshal(room)
	if err := n.ioctl(b); err != nil {
		return rxnfc{}, err
	}
	return unmarshalRxnfc(b)
}

// ruleCount returns GRXCLSRLCNT's answer: rules in use, table size and
// whether the driver picks locations.
func (n *ethtoolNIC) ruleCount() (count, size uint32, locAny bool, err error) {
	x, err := n.rxnfc(rxnfc{cmd: unix.ETHTOOL_GRXCLSRLCNT}, 0)
	if err != nil {
		return 0, 0, false, err
	}
	return x.ruleCnt, uint32(x.data &^ rxClsLocSpecial), x.data&rxClsLocSpecial != 0, nil
}

// locations lists the locations in use (GRXCLSRLCNT then GRXCLSRLALL,
// retried if rules were added in between).
func (n *ethtoolNIC) locations() ([]uint32, error) {
	for range 3 {
		count, _, _, err := n.ruleCount()
		if err != nil {
			return nil, err
		}
		if count == 0 {
			return nil, nil
		}
		x, err := n.rxnfc(rxnfc{cmd: unix.ETHTOOL_GRXCLSRLALL, ruleCnt: count}, int(count))
		if errors.Is(err, unix.EMSGSIZE) {
			continue
		}
		return x.ruleLocs, err
	}
	return nil, fmt.Errorf("ethtool GRXCLSRLALL on %s: rule count keeps changing", n.name)
}

// Insert adds r (exact match, TCP) and returns the location the rule got.
func (n *ethtoolNIC) Insert(r NtupleRule) (uint32, error) {
	if r.Loc == LocAny && !n.locAny {
		locs, err := n.locations()
		if err != nil {
			return 0, err
		}
		// As ethtool does: the last free slot, the lowest priority, so that
		// rules an operator put first keep precedence.
		loc, ok := lastFree(n.size, locs)
		if !ok {
			return 0, fmt.Errorf("%w: %s has %d locations", ErrRuleTableFull, n.name, n.size)
		}
		r.Loc = loc
	}
	b, err := insertRequest(r)
	if err != nil {
		return 0, err
	}
	if err := n.ioctl(b); err != nil {
		return 0, fmt.Errorf("insert %s: %w", r, err)
	}
	// The kernel copies the rule back with the location the driver chose.
	return binary.NativeEndian.Uint32(b[rxnfcFS+fsLocation:]), nil
}

// lastFree returns the highest location below size not in used.
func lastFree(size uint32, used []uint32) (uint32, bool) {
	taken := make(map[uint32]bool, len(used))
	for _, l := range used {
		taken[l] = true
	}
	for l := size; l > 0; l-- {
		if !taken[l-1] {
			return l - 1, true
		}
	}
	return 0, false
}

// Delete removes the rule at loc.
func (n *ethtoolNIC) Delete(loc uint32) error {
	return n.ioctl(deleteRequest(loc))
}

// Rules lists the NIC's exact-match TCP rules; rules of any other kind
// (other flow types, masks, drop or VF actions) are left out.
func (n *ethtoolNIC) Rules() ([]NtupleRule, error) {
	locs, err := n.locations()
	if err != nil {
		return nil, err
	}
	var rules []NtupleRule
	for _, loc := range locs {
		x, err := n.rxnfc(rxnfc{cmd: unix.ETHTOOL_GRXCLSRULE, fs: flowSpec{location: loc}}, 0)
		if errors.Is(err, unix.ENOENT) {
			continue // deleted since GRXCLSRLALL
		}
		if err != nil {
			return nil, err
		}
		if r, ok := x.fs.rule(); ok {
			rules = append(rules, r)
		}
	}
	return rules, nil
}

// Indir returns the RSS indirection table (GRXFHINDIR).
func (n *ethtoolNIC) Indir() ([]uint32, error) {
	head := make([]byte, indirHeader)
	binary.NativeEndian.PutUint32(head, unix.ETHTOOL_GRXFHINDIR)
	if err := n.ioctl(head); err != nil {
		return nil, err
	}
	size := binary.NativeEndian.Uint32(head[4:])
	if size == 0 {
		return nil, fmt.Errorf("ethtool GRXFHINDIR on %s: no indirection table: %w", n.name, errors.ErrUnsupported)
	}
	b := make([]byte, indirHeader+4*int(size))
	copy(b, head)
	if err := n.ioctl(b); err != nil {
		return nil, err
	}
	t := make([]uint32, size)
	for i := range t {
		t[i] = binary.NativeEndian.Uint32(b[indirHeader+4*i:])
	}
	return t, nil
}

// SetIndir sets the RSS indirection table (SRXFHINDIR); an empty table
// resets it to the driver's default spread.
func (n *ethtoolNIC) SetIndir(t []uint32) error {
	b := make([]byte, indirHeader+4*len(t))
	binary.NativeEndian.PutUint32(b, unix.ETHTOOL_SRXFHINDIR)
	binary.NativeEndian.PutUint32(b[4:], uint32(len(t)))
	for i, q := range t {
		binary.NativeEndian.PutUint32(b[indirHeader+4*i:], q)
	}
	return n.ioctl(b)
}

// Queues returns the number of RX queues (GRXRINGS, which is what ring
// cookies index; GCHANNELS when the driver does not answer it).
func (n *ethtoolNIC) Queues() (int, error) {
	x, err := n.rxnfc(rxnfc{cmd: unix.ETHTOOL_GRXRINGS}, 0)
	if err == nil && x.data > 0 {
		return int(x.data), nil
	}
	b := make([]byte, channelsSize)
	binary.NativeEndian.PutUint32(b, unix.ETHTOOL_GCHANNELS)
	if cerr := n.ioctl(b); cerr != nil {
		return 0, errors.Join(err, cerr)
	}
	ne := binary.NativeEndian
	return int(ne.Uint32(b[20:]) + ne.Uint32(b[32:])), nil
}

// Close closes the socket the ioctls go through.
func (n *ethtoolNIC) Close() error { return unix.Close(n.fd) }

// driver returns the driver name and bus address (GDRVINFO).
func (n *ethtoolNIC) driver() (driver, bus string, err error) {
	b := make([]byte, drvinfoSize)
	binary.NativeEndian.PutUint32(b, unix.ETHTOOL_GDRVINFO)
	if err := n.ioctl(b); err != nil {
		return "", "", err
	}
	cstr := func(b []byte) string {
		s, _, _ := strings.Cut(string(b), "\x00")
		return s
	}
	return cstr(b[4:36]), cstr(b[100:132]), nil
}

// feature reports a netdev feature by its kernel name ("rx-ntuple-filter"):
// whether it is on and whether it can be changed (GSSET_INFO, GSTRINGS,
// GFEATURES).
func (n *ethtoolNIC) feature(name string) (on, fixed bool, err error) {
	ne := binary.NativeEndian
	info := make([]byte, ssetInfoData+4)
	ne.PutUint32(info, unix.ETHTOOL_GSSET_INFO)
	ne.PutUint64(info[8:], 1<<ssFeatures)
	if err := n.ioctl(info); err != nil {
		return false, false, err
	}
	if ne.Uint64(info[8:])&(1<<ssFeatures) == 0 {
		return false, false, fmt.Errorf("ethtool GSSET_INFO on %s: no feature strings: %w", n.name, errors.ErrUnsupported)
	}
	count := ne.Uint32(info[ssetInfoData:])
	strs := make([]byte, gstringsData+gstringLen*int(count))
	ne.PutUint32(strs, unix.ETHTOOL_GSTRINGS)
	ne.PutUint32(strs[4:], ssFeatures)
	ne.PutUint32(strs[8:], count)
	if err := n.ioctl(strs); err != nil {
		return false, false, err
	}
	index := -1
	for i := range int(count) {
		s, _, _ := strings.Cut(string(strs[gstringsData+gstringLen*i:gstringsData+gstringLen*(i+1)]), "\x00")
		if s == name {
			index = i
			break
		}
	}
	if index < 0 {
		return false, false, fmt.Errorf("feature %q on %s: %w", name, n.name, errors.ErrUnsupported)
	}
	blocks := (int(count) + 31) / 32
	feats := make([]byte, gfeaturesBlocks+gfeaturesBlock*blocks)
	ne.PutUint32(feats, unix.ETHTOOL_GFEATURES)
	ne.PutUint32(feats[4:], uint32(blocks))
	if err := n.ioctl(feats); err != nil {
		return false, false, err
	}
	blk := feats[gfeaturesBlocks+gfeaturesBlock*(index/32):]
	bit := uint32(1) << (index % 32)
	available, active, neverChanged := ne.Uint32(blk[0:]), ne.Uint32(blk[8:]), ne.Uint32(blk[12:])
	return active&bit != 0, available&bit == 0 || neverChanged&bit != 0, nil
}
