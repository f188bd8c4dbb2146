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
	if len(b) != 24+16+28+len(raw) {
		t.Fatalf("file is %d bytes", len(b))
	}
	if binary.LittleEndian.Uint32(b) != pcapMagicMicro || binary.LittleEndian.Uint32(b[20:]) != linktypeRaw {
		t.Fatalf("bad file header % x", b[:24])
	}
	rec := b[24:]
	if binary.LittleEndian.Uint32(rec) != 1700000000 || binary.LittleEndian.Uint32(rec[4:]) != 123456 {
		t.Errorf("timestamp % x", rec[:8])
	}
	ip := rec[16:]
	if ipChecksum(ip[:20]) != 0 {
		t.Error("IPv4 header checksum does not verify")
	}
	if !bytes.Equal(ip[12:16], pcapCEAddr[:]) || binary.BigEndian.Uint16(ip[20:]) != PcapCEPort ||
		binary.BigEndian.Uint16(ip[22:]) != PcapFEPort {
		t.Errorf("CE->FE addressing wrong: % x", ip[:28])
	}
	if !bytes.Equal(ip[28:], raw) {
		t.Error("payload differs")
	}

	// An oversized message is recorded truncated, with its original length.
	buf.Reset()
	p, _ = NewPcapWriter(&buf)
	big := make([]byte, 100_000)
	if err := p.WriteMessage(big, false, at); err != nil {
		t.Fatal(err)
	}
	rec = buf.Bytes()[24:]
	if capLen, orig := binary.LittleEndian.Uint32(rec[8:]), binary.LittleEndian.Uint32(rec[12:]); capLen != 65535 || orig != 100_028 {
		t.Errorf("caplen %d len %d", capLen, orig)
	}
	if len(rec) != 16+65535 {
		t.Errorf("record is %d bytes", len(rec))
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
		"udp.srcport", "forces.messagetype", "forces.length", "forces.tlv.type", "forces.tlv.length",
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
	args := []string{"-r", path, "-d", "udp.port==6700,forces", "-T", "fields",
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
