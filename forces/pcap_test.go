package forces

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

type sample struct {
	name   string
	fromCE bool
	msg    *Message
}

// ipv4Packet is a minimal IPv4/UDP packet, so that dissectors that hand
// REDIRECTDATA to the IP dissector find a well-formed one.
func ipv4Packet() []byte {
	p := []byte{
		0x45, 0, 0, 32, 0, 1, 0x40, 0, 64, 17, 0, 0, 192, 0, 2, 1, 198, 51, 100, 7,
		0x30, 0x39, 0x00, 0x35, 0, 12, 0, 0, 'p', 'i', 'n', 'g',
	}
	binary.BigEndian.PutUint16(p[10:], ipChecksum(p[:20]))
	return p
}

// samples returns one message of every kind splitplane produces.
func samples(t testing.TB) []sample {
	t.Helper()
	route := IPv4PrefixInfo{Prefix: netip.MustParsePrefix("198.51.100.0/24"), HopSelector: 3}.MarshalFullData()
	nh := IPv4NextHopInfo{L3PortID: 2, MTU: 1500, NextHop: netip.MustParseAddr("192.0.2.1")}.MarshalFullData()
	cfgs, err := BuildConfig(Header{Src: testCE, Dst: testFE, Flags: Flags{ACK: AlwaysACK, ExecMode: ExecContinueOnFailure}}, nil, []TableOp{
		{Op: OpSet, ClassID: ClassIPv4NextHop, InstanceID: 1, Path: []uint32{CompIPv4NextHopTable, 3}, FullData: nh},
		{Op: OpSet, ClassID: ClassIPv4UcastLPM, InstanceID: 1, Path: []uint32{CompIPv4PrefixTable, 7}, FullData: route},
		{Op: OpDel, ClassID: ClassIPv4UcastLPM, InstanceID: 1, Path: []uint32{CompIPv4PrefixTable, 8}},
		{Op: OpDel, ClassID: ClassIPv4NextHop, InstanceID: 1, Path: []uint32{CompIPv4NextHopTable, 4}},
	})
	if err != nil || len(cfgs) != 1 {
		t.Fatalf("BuildConfig: %v, %d messages", err, len(cfgs))
	}
	cfgResp, err := NewConfigResponse(cfgs[0], ResultSuccess, ResultSuccess, ResultNotFound, ResultSuccess)
	if err != nil {
		t.Fatal(err)
	}
	q := NewDiscoveryQuery(testCE, testFE, 9)
	lfbs, _ := MarshalSupportedLFBs([]SupportedLFB{{"FEObject", ClassFEObject, "1.0"}, {"IPv4UcastLPM", ClassIPv4UcastLPM, "1.0"}})
	qr, err := NewQueryResponse(q, func(it Item) ([]byte, ResultCode) {
		switch {
		case it.ClassID == ClassFEObject && it.Path[0] == FEObjectFEName:
			return []byte("fe-1"), ResultSuccess
		case it.ClassID == ClassFEObject && it.Path[0] == FEObjectFEState:
			return FEStateOperEnable.MarshalFullData(), ResultSuccess
		case it.ClassID == ClassFEObject && it.Path[0] == FEObjectSupportedLFBs:
			return lfbs, ResultSuccess
		case it.ClassID == ClassFEProtocol && it.Path[0] == FEProtoFEHI:
			return Uint32FullData(500), ResultSuccess
		}
		return nil, ResultNotSupported
	})
	if err != nil {
		t.Fatal(err)
	}
	commit := NewCommit(testCE, testFE, 20)
	commitResp, err := NewCommitResponse(commit, ResultSuccess)
	if err != nil {
		t.Fatal(err)
	}
	ports, _ := MarshalPortInfos([]PortInfo{{ID: 1, Name: "eth0", MAC: [6]byte{2, 0, 0, 0, 0, 1}, Up: true}})
	hb := HeartbeatPolicy{CEHBPolicy: CEHBPolicy0, CEHDI: 3000, FEHBPolicy: FEHBPolicy1, FEHI: 1000}
	hbCfg, err := BuildConfig(Header{Src: testCE, Dst: testFE, Correlator: 30}, nil, hb.Ops())
	if err != nil {
		t.Fatal(err)
	}
	setup := NewAssociationSetup(testFE, testCE, 1)
	return []sample{
		{"AssociationSetup", false, setup},
		{"AssociationSetupResponse", true, NewAssociationSetupResponse(setup, uint32(SetupSuccess))},
		{"Config", true, cfgs[0]},
		{"ConfigResponse", false, cfgResp},
		{"Query", true, q},
		{"QueryResponse", false, qr},
		{"Config(heartbeat policy)", true, hbCfg[0]},
		{"EventNotification", false, NewEventNotification(testFE, testCE, 0, ClassFEObject, 1, []uint32{6, 1}, ports)},
		{"PacketRedirect(FE->CE)", false, NewPacketRedirect(testFE, testCE, 0,
			Redirect{Metadata: []Metadata{PortMetadata(1)}, Data: ipv4Packet()})},
		{"PacketRedirect(CE->FE)", true, NewPacketRedirect(testCE, testFE, 0,
			Redirect{Metadata: []Metadata{PortMetadata(2), {ID: MetaVlanPriority, Value: []byte{5}}}, Data: ipv4Packet()})},
		{"Heartbeat", true, NewHeartbeat(testCE, testFE, 40, AlwaysACK)},
		{"COMMIT", true, commit},
		{"COMMIT-RESPONSE", false, commitResp},
		{"TRCOMP", true, NewTRComp(testCE, testFE, 21)},
		{"AssociationTeardown", true, NewAssociationTeardown(testCE, testFE, uint32(TeardownNormal))},
	}
}

// bigConfig returns a valid Config of exactly size bytes (a multiple of 4):
// LFBselect-TLVs of one SET each, as large as a TLV may be.
func bigConfig(t testing.TB, size int) []byte {
	t.Helper()
	var lfbs []LFBSelect
	for i, rest := 0, size-HeaderLen; rest > 0; i++ {
		l := min(rest, 65532)
		rest -= l
		lfbs = append(lfbs, LFBSelect{ClassID: ClassIPv4UcastLPM, InstanceID: 1, Ops: []Operation{{Type: OpSet,
			Paths: []PathData{{IDs: []uint32{CompIPv4PrefixTable, uint32(i)}, FullData: bytes.Repeat([]byte{byte(i + 1)}, l-36), HasFullData: true}}}}})
	}
	m := &Message{Header: Header{Version: ProtocolVersion, Type: MsgConfig, Src: testCE, Dst: testFE}, LFBs: lfbs}
	raw, err := m.MarshalBinary()
	if err != nil || len(raw) != size {
		t.Fatalf("big Config: %v, %d bytes, want %d", err, len(raw), size)
	}
	return raw
}

// pcapMessage is one message read back from a capture.
type pcapMessage struct {
	raw    []byte
	fromCE bool
	fePort uint16
}

// readPcap parses a file written by PcapWriter: it checks every record's
// IPv4 and TCP headers and checksums, reassembles each direction of each
// stream in sequence order, and splits the streams into messages, returned
// in the order their last segment appears.
func readPcap(t *testing.T, b []byte) []pcapMessage {
	t.Helper()
	if len(b) < 24 || binary.LittleEndian.Uint32(b) != pcapMagicMicro || binary.LittleEndian.Uint32(b[20:]) != linktypeRaw {
		t.Fatal("bad pcap file header")
	}
	type dir struct {
		fePort uint16
		fromCE bool
	}
	type state struct {
		syn  bool
		next uint32
		buf  []byte
	}
	streams := map[dir]*state{}
	var out []pcapMessage
	for b = b[24:]; len(b) > 0; {
		if len(b) < pcapRecLen {
			t.Fatal("truncated record header")
		}
		capLen, origLen := binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[12:])
		if capLen != origLen || int(capLen) > len(b)-pcapRecLen || capLen > pcapSnapLen {
			t.Fatalf("record caplen %d len %d, %d bytes left", capLen, origLen, len(b)-pcapRecLen)
		}
		ip := b[pcapRecLen : pcapRecLen+capLen]
		b = b[pcapRecLen+capLen:]
		if ip[0] != 0x45 || ip[9] != 6 || int(binary.BigEndian.Uint16(ip[2:])) != len(ip) || ipChecksum(ip[:20]) != 0 {
			t.Fatalf("bad IPv4 header % x", ip[:20])
		}
		seg := ip[20:]
		if fold(onesSum(seg, onesSum(ip[12:20], 6+uint32(len(seg))))) != 0xffff {
			t.Fatal("TCP checksum does not verify")
		}
		sport, dport := binary.BigEndian.Uint16(seg), binary.BigEndian.Uint16(seg[2:])
		var d dir
		switch {
		case sport == PcapCEPort && bytes.Equal(ip[12:16], pcapCEAddr[:]) && bytes.Equal(ip[16:20], pcapFEAddr[:]):
			d = dir{dport, true}
		case dport == PcapCEPort && bytes.Equal(ip[12:16], pcapFEAddr[:]) && bytes.Equal(ip[16:20], pcapCEAddr[:]):
			d = dir{sport, false}
		default:
			t.Fatalf("segment %d -> %d is not between the CE and an FE", sport, dport)
		}
		seq, flags, hl := binary.BigEndian.Uint32(seg[4:]), seg[13], int(seg[12]>>4)*4
		payload := seg[hl:]
		st := streams[d]
		if st == nil {
			st = &state{}
			streams[d] = st
		}
		if flags&tcpSYN != 0 {
			if st.syn {
				t.Fatalf("second SYN on %+v", d)
			}
			st.syn, st.next = true, seq+1
			continue
		}
		if !st.syn {
			t.Fatalf("data before the SYN on %+v", d)
		}
		if seq != st.next {
			t.Fatalf("%+v: seq %d, want %d", d, seq, st.next)
		}
		st.next += uint32(len(payload))
		st.buf = append(st.buf, payload...)
		for len(st.buf) >= PcapTMLPrefixLen+HeaderLen {
			n := int(binary.BigEndian.Uint16(st.buf[PcapTMLPrefixLen+2:])) * 4
			if len(st.buf) < PcapTMLPrefixLen+n {
				break
			}
			out = append(out, pcapMessage{bytes.Clone(st.buf[PcapTMLPrefixLen : PcapTMLPrefixLen+n]), d.fromCE, d.fePort})
			st.buf = st.buf[PcapTMLPrefixLen+n:]
		}
	}
	for d, st := range streams {
		if len(st.buf) != 0 {
			t.Errorf("%+v: %d bytes left over", d, len(st.buf))
		}
	}
	return out
}

func TestPcapWriterFormat(t *testing.T) {
	var buf bytes.Buffer
	p, err := NewPcapWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := NewHeartbeat(testCE, testFE, 1, NoACK).MarshalBinary()
	at := time.Unix(1700000000, 123456000)
	if err := p.WriteMessage(raw, true, at); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	// The handshake (two SYNs with 8 bytes of options, an ACK), then the
	// message in one segment.
	if len(b) != 24+3*(16+40)+2*8+16+40+PcapTMLPrefixLen+len(raw) {
		t.Fatalf("file is %d bytes", len(b))
	}
	rec := b[24:]
	if binary.LittleEndian.Uint32(rec) != 1700000000 || binary.LittleEndian.Uint32(rec[4:]) != 123456 {
		t.Errorf("timestamp % x", rec[:8])
	}
	if syn := rec[16:]; !bytes.Equal(syn[12:16], pcapFEAddr[:]) || syn[33] != tcpSYN {
		t.Errorf("first packet is not the FE's SYN: % x", syn[:40])
	}
	last := b[len(b)-40-PcapTMLPrefixLen-len(raw):]
	if !bytes.Equal(last[12:16], pcapCEAddr[:]) || binary.BigEndian.Uint16(last[20:]) != PcapCEPort ||
		binary.BigEndian.Uint16(last[22:]) != PcapFEPort || last[33] != tcpACK|tcpPSH {
		t.Errorf("CE->FE segment wrong: % x", last[:40])
	}
	if !bytes.Equal(last[40:], append([]byte{raw[0], 0}, raw...)) {
		t.Error("payload differs")
	}
	if got := readPcap(t, b); len(got) != 1 || !bytes.Equal(got[0].raw, raw) || !got[0].fromCE {
		t.Errorf("read back %+v", got)
	}
}

// TestPcapWholeMessages writes messages of every size up to the largest
// ForCES allows, in both directions and on several streams, interleaved,
// and reads every one back bytes-identical.
func TestPcapWholeMessages(t *testing.T) {
	var buf bytes.Buffer
	p, _ := NewPcapWriter(&buf)
	ceTap, feTap := p.Tap(true), p.Tap(false)
	type rec struct {
		raw    []byte
		fromCE bool
		fePort uint16
	}
	var want []rec
	at := time.Unix(1700000000, 0)
	hb, _ := NewHeartbeat(testCE, testFE, 1, NoACK).MarshalBinary()
	for i, size := range []int{MaxMessageLen, 24, PcapMaxSegment - 2, PcapMaxSegment - 1, PcapMaxSegment + 2, 100_000, 2 * PcapMaxSegment, MaxMessageLen} {
		size &^= 3
		big := bigConfig(t, max(size, 64))
		fromCE := i%2 == 0
		if err := p.WriteMessage(big, fromCE, at); err != nil {
			t.Fatal(err)
		}
		want = append(want, rec{big, fromCE, PcapFEPort + 2})
		// The taps' streams: the CE's sent messages come from the CE, the
		// FE's received ones too.
		ceTap(hb, i%3 == 0)
		want = append(want, rec{hb, i%3 == 0, PcapFEPort})
		feTap(big, i%3 != 0)
		want = append(want, rec{big, i%3 == 0, PcapFEPort + 1})
	}
	// Enough in one direction that the receiver sends pure ACKs.
	for range 10 {
		big := bigConfig(t, MaxMessageLen)
		ceTap(big, true)
		want = append(want, rec{big, true, PcapFEPort})
	}
	if p.Err() != nil {
		t.Fatal(p.Err())
	}
	got := readPcap(t, buf.Bytes())
	if len(got) != len(want) {
		t.Fatalf("read %d messages, wrote %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].raw, want[i].raw) || got[i].fromCE != want[i].fromCE || got[i].fePort != want[i].fePort {
			t.Errorf("message %d: read %d bytes fromCE=%v port %d, wrote %d bytes fromCE=%v port %d", i,
				len(got[i].raw), got[i].fromCE, got[i].fePort, len(want[i].raw), want[i].fromCE, want[i].fePort)
		}
	}
}

// writeSamplePcap writes samples to a pcap file and returns its path.
//
// With wiresharkCompat, the copy written to the file has every top-level
// TLV's Length divided by 4, to undo the known bug of Wireshark's ForCES
// dissector (see TestTsharkInterop), so that the dissector walks the nested
// TLVs, which it reads correctly in bytes.
func writeSamplePcap(t *testing.T, ss []sample, wiresharkCompat bool) string {
	t.Helper()
	name := "forces.pcap"
	if wiresharkCompat {
		name = "forces-wscompat.pcap"
	}
	path := filepath.Join(t.TempDir(), name)
	if d := os.Getenv("FORCES_PCAP_DIR"); d != "" {
		path = filepath.Join(d, name)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPcapWriter(f)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1700000000, 0)
	for i, s := range ss {
		raw, err := s.msg.MarshalBinary()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if _, err := Parse(raw); err != nil {
			t.Fatalf("%s does not parse back: %v", s.name, err)
		}
		if wiresharkCompat {
			for b := raw[HeaderLen:]; len(b) >= 4; {
				l := binary.BigEndian.Uint16(b[2:])
				if l%4 != 0 {
					t.Fatalf("%s: top-level TLV length %d is not a multiple of 4", s.name, l)
				}
				binary.BigEndian.PutUint16(b[2:], l/4)
				b = b[l:]
			}
		}
		if err := p.WriteMessage(raw, s.fromCE, at.Add(time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTsharkInterop has Wireshark's ForCES dissector decode one message of
// every kind splitplane sends.
//
// The dissector shipped with tshark 4.0 has bugs that no RFC 5810 encoding
// can satisfy; tcpdump's ForCES printer and RFC 5810 §6.2 (TLV Length in
// octets, including the header) agree with this package:
//
//  1. it multiplies a top-level TLV's Length by 4, as if it were in words
//     (an 8-byte ASResult-TLV is shown as "Length: 32 bytes" followed by
//     "Bogus: Main TLV length (32 bytes) is wrong" and an exception), while it
//     reads every nested TLV's Length in bytes;
//  2. it uses the first operation's length for every operation of an
//     LFBselect, throwing an exception on a shorter later one, and runs the
//     operations of the first LFBselect on to the end of the message;
//  3. it reads PATH-DATA IDs two bytes early (from the IDcount field);
//  4. it reads a metadata ILV's ID and Length 4 bytes late (the ID shown is
//     the ILV's Length) and walks on from there into garbage;
//  5. it skips an operation TLV that ends the message when it is exactly 4
//     bytes long (its loop wants more than 4 bytes left), as the empty COMMIT
//     and TRCOMP are.
//
// So the test makes two passes. Over the messages as sent, it checks what the
// dissector gets right before bug 1 stops it: direction, message type, header
// length, the first TLV's type and (times 4) its length, and that nothing but
// bug 1 is reported. Then it undoes bugs 1 and 2 in a copy (top-level
// lengths divided by 4, one operation per message) and checks operation
// types and PATH-DATA counts with no complaint at all, except bug 4 on
// Packet Redirects, where it checks the METADATA-TLV's type and length.
func TestTsharkInterop(t *testing.T) {
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("tshark not installed (apt-get install -y tshark); skipping the dissector interop test")
	}
	ss := samples(t)

	// Pass 1: the messages as sent.
	out := tsharkFields(t, writeSamplePcap(t, ss, false),
		"tcp.srcport", "forces.messagetype", "forces.length", "forces.tlv.type", "forces.tlv.length",
		"_ws.expert.message")
	if len(out) != len(ss) {
		t.Fatalf("tshark printed %d packets, want %d", len(out), len(ss))
	}
	for i, f := range out {
		s := ss[i]
		raw, _ := s.msg.MarshalBinary()
		wantPort := strconv.Itoa(PcapFEPort)
		if s.fromCE {
			wantPort = strconv.Itoa(PcapCEPort)
		}
		if f[0] != wantPort {
			t.Errorf("%s: source port %s, want %s", s.name, f[0], wantPort)
		}
		if want := strconv.Itoa(int(s.msg.Header.Type)); f[1] != want {
			t.Errorf("%s: tshark message type %s, want %s", s.name, f[1], want)
		}
		if want := strconv.Itoa(len(raw)); f[2] != want {
			t.Errorf("%s: tshark header length %s bytes, want %s", s.name, f[2], want)
		}
		if len(raw) == HeaderLen {
			if f[3] != "" || f[5] != "" {
				t.Errorf("%s: header-only message, tshark saw TLV %q, complaints %q", s.name, f[3], f[5])
			}
			continue
		}
		typ, l := binary.BigEndian.Uint16(raw[HeaderLen:]), int(binary.BigEndian.Uint16(raw[HeaderLen+2:]))
		if first, _, _ := strings.Cut(f[3], ","); first != strconv.Itoa(int(typ)) {
			t.Errorf("%s: tshark first TLV type %s, want %d", s.name, f[3], typ)
		}
		first, _, _ := strings.Cut(f[4], ",")
		switch first {
		case strconv.Itoa(l): // a dissector without bug 1
		case strconv.Itoa(4 * l):
			want := fmt.Sprintf("Bogus: Main TLV length (%d bytes) is wrong", 4*l)
			for _, c := range strings.Split(f[5], ",") {
				if c != want && c != "Malformed Packet (Exception occurred)" {
					t.Errorf("%s: tshark complains %q beyond its TLV-length bug", s.name, c)
				}
			}
		default:
			t.Errorf("%s: tshark first TLV length %s, want %d (or %d with its bug)", s.name, f[4], l, 4*l)
		}
	}

	// Pass 2: bugs 1 and 2 undone.
	one := oneOpPerMessage(ss)
	out = tsharkFields(t, writeSamplePcap(t, one, true),
		"forces.messagetype", "forces.lfbselect.tlv.type.operation.type",
		"forces.lfbselect.tlv.type.operation.path.data.IDcount",
		"forces.redirect.tlv.meta.data.tlv.type", "forces.redirect.tlv.meta.data.tlv.length",
		"_ws.expert.message")
	if len(out) != len(one) {
		t.Fatalf("tshark printed %d packets, want %d", len(out), len(one))
	}
	for i, f := range out {
		s := one[i]
		if want := strconv.Itoa(int(s.msg.Header.Type)); f[0] != want {
			t.Errorf("%s: tshark message type %s, want %s", s.name, f[0], want)
		}
		if s.msg.Header.Type == MsgPacketRedirect {
			raw, _ := s.msg.MarshalBinary()
			ml := binary.BigEndian.Uint16(raw[HeaderLen+6:])
			if f[3] != strconv.Itoa(int(TLVMetadata)) || f[4] != strconv.Itoa(int(ml)) {
				t.Errorf("%s: tshark METADATA-TLV type %s length %s, want %d %d", s.name, f[3], f[4], TLVMetadata, ml)
			}
			continue // bug 4
		}
		if f[5] != "" {
			t.Errorf("%s: tshark complains: %s", s.name, f[5])
		}
		if len(s.msg.LFBs) == 0 {
			continue
		}
		op := s.msg.LFBs[0].Ops[0]
		empty := len(op.Paths) == 0 && op.Result == nil
		if want := strconv.Itoa(int(op.Type)); f[1] != want && !(empty && f[1] == "") { // bug 5
			t.Errorf("%s: tshark operation type %q, want %s", s.name, f[1], want)
		}
		if len(op.Paths) > 0 {
			if want := strconv.Itoa(len(op.Paths[0].IDs)); !strings.HasPrefix(f[2], want) {
				t.Errorf("%s: tshark PATH-DATA IDcount %q, want %s", s.name, f[2], want)
			}
		}
	}
}

// tsharkFields decodes path with tshark and returns the fields of each packet.
func tsharkFields(t *testing.T, path string, fields ...string) [][]string {
	t.Helper()
	args := []string{"-r", path, "-d", "tcp.port==6700,forces", "-Y", "forces", "-T", "fields",
		"-E", "separator=|", "-E", "occurrence=a", "-E", "aggregator=,"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command("tshark", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark %v: %v\n%s%s", args, err, out, stderr.Bytes())
	}
	if testing.Verbose() {
		t.Logf("tshark %s:\n%s", filepath.Base(path), out)
	}
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		rows = append(rows, strings.Split(line, "|"))
	}
	return rows
}

// oneOpPerMessage returns ss with every message of several LFBselect-TLVs or
// operations split into one message per operation (see TestTsharkInterop).
func oneOpPerMessage(ss []sample) []sample {
	var out []sample
	for _, s := range ss {
		n := 0
		for _, l := range s.msg.LFBs {
			n += len(l.Ops)
		}
		if n <= 1 {
			out = append(out, s)
			continue
		}
		for i, l := range s.msg.LFBs {
			for j := range l.Ops {
				m := *s.msg
				m.LFBs = []LFBSelect{{ClassID: l.ClassID, InstanceID: l.InstanceID, Ops: l.Ops[j : j+1]}}
				out = append(out, sample{name: fmt.Sprintf("%s[LFB %d op %d]", s.name, i, j), fromCE: s.fromCE, msg: &m})
			}
		}
	}
	return out
}

// TestTsharkLargeMessage has tshark read a capture holding a Config of the
// largest size ForCES allows between two small messages: TCP sees a valid
// stream (TCP checksums good, no analysis warnings), and the ForCES dissector
// reads the Config's header, with its full length, and the messages around
// it.
//
// tshark 4.0's ForCES dissector does not ask TCP to reassemble a message
// that spans segments (it dissects each segment on its own), so the
// segments after the Config's first are shown as ForCES garbage; the bytes
// are whole in the file (TestPcapWholeMessages) for a dissector that does.
func TestTsharkLargeMessage(t *testing.T) {
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("tshark not installed (apt-get install -y tshark); skipping the dissector interop test")
	}
	path := filepath.Join(t.TempDir(), "large.pcap")
	var buf bytes.Buffer
	p, _ := NewPcapWriter(&buf)
	hb, _ := NewHeartbeat(testCE, testFE, 1, NoACK).MarshalBinary()
	at := time.Unix(1700000000, 0)
	p.WriteMessage(hb, true, at)
	p.WriteMessage(bigConfig(t, MaxMessageLen), true, at.Add(time.Millisecond))
	p.WriteMessage(hb, false, at.Add(2*time.Millisecond))
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("tshark", "-r", path, "-d", "tcp.port==6700,forces",
		"-o", "tcp.check_checksum:TRUE", "-o", "tcp.desegment_tcp_streams:TRUE", "-T", "fields",
		"-E", "separator=|", "-e", "tcp.len", "-e", "tcp.checksum.status", "-e", "tcp.analysis.flags",
		"-e", "ip.checksum.status", "-e", "forces.messagetype", "-e", "forces.length").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	if testing.Verbose() {
		t.Logf("tshark:\n%s", out)
	}
	rows := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	// Handshake, heartbeat, 5 segments of Config, heartbeat.
	segs := (PcapTMLPrefixLen + MaxMessageLen + PcapMaxSegment - 1) / PcapMaxSegment
	if len(rows) != 3+1+segs+1 {
		t.Fatalf("tshark printed %d packets, want %d", len(rows), 3+1+segs+1)
	}
	for i, r := range rows {
		f := strings.Split(r, "|")
		if f[1] != "1" || f[2] != "" || f[3] != "2" && f[3] != "1" {
			t.Errorf("packet %d: TCP checksum status %q, analysis %q, IP checksum status %q", i+1, f[1], f[2], f[3])
		}
	}
	first := strings.Split(rows[4], "|")
	if first[0] != strconv.Itoa(PcapMaxSegment) || first[4] != "3" || first[5] != strconv.Itoa(MaxMessageLen) {
		t.Errorf("Config's first segment: tcp.len %s, type %s, length %s", first[0], first[4], first[5])
	}
	for _, i := range []int{3, len(rows) - 1} {
		if f := strings.Split(rows[i], "|"); f[4] != "15" || f[5] != "24" {
			t.Errorf("packet %d: type %s length %s, want a heartbeat", i+1, f[4], f[5])
		}
	}
}
