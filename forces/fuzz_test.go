package forces

import (
	"net/netip"
	"reflect"
	"testing"
)

func FuzzParseIPv4PrefixInfo(f *testing.F) {
	f.Add(prefixRow198())
	f.Add(IPv4PrefixInfo{Prefix: netip.MustParsePrefix("0.0.0.0/0"), ECMP: true, DefaultRoute: true}.MarshalFullData())
	hostBits := prefixRow198()
	hostBits[3] = 0x7f // host bits under the prefix length
	f.Add(hostBits)
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseIPv4PrefixInfo(b)
		if err != nil {
			return
		}
		if want := netip.PrefixFrom(netip.AddrFrom4([4]byte(b)), int(b[4])).Masked(); p.Prefix != want {
			t.Fatalf("prefix %s, want %s (netip's masking)", p.Prefix, want)
		}
		// A row that parses re-encodes to itself once host bits are cleared.
		again, err := ParseIPv4PrefixInfo(p.MarshalFullData())
		if err != nil || again != p {
			t.Fatalf("round trip %+v -> %+v, %v", p, again, err)
		}
	})
}

func FuzzParseIPv4NextHopInfo(f *testing.F) {
	f.Add(IPv4NextHopInfo{L3PortID: 1, MTU: 1500, NextHop: netip.MustParseAddr("192.0.2.1")}.MarshalFullData())
	f.Add(make([]byte, IPv4NextHopInfoLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ParseIPv4NextHopInfo(b)
		if err != nil {
			return
		}
		if out := n.MarshalFullData(); !reflect.DeepEqual(out, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", b, out)
		}
	})
}

func FuzzParseSupportedLFBs(f *testing.F) {
	b, _ := MarshalSupportedLFBs([]SupportedLFB{{"FEObject", 1, "1.0"}, {"IPv4UcastLPM", 10, "1.0"}})
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, err := ParseSupportedLFBs(b)
		if err != nil {
			return
		}
		out, err := MarshalSupportedLFBs(rows)
		if err != nil {
			t.Fatalf("re-marshal: %v", err)
		}
		again, err := ParseSupportedLFBs(out)
		if err != nil || !reflect.DeepEqual(again, rows) {
			t.Fatalf("round trip %+v -> %+v, %v", rows, again, err)
		}
	})
}

func FuzzParsePortInfos(f *testing.F) {
	b, _ := MarshalPortInfos([]PortInfo{{ID: 1, Name: "eth0", MAC: [6]byte{2, 0, 0, 0, 0, 1}, Up: true}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, err := ParsePortInfos(b)
		if err != nil {
			return
		}
		out, err := MarshalPortInfos(rows)
		if err != nil {
			t.Fatalf("re-marshal: %v", err)
		}
		again, err := ParsePortInfos(out)
		if err != nil || !reflect.DeepEqual(again, rows) {
			t.Fatalf("round trip %+v -> %+v, %v", rows, again, err)
		}
	})
}

// FuzzScalars covers the small FULLDATA decoders.
func FuzzScalars(f *testing.F) {
	f.Add([]byte{2, 0, 0, 0})
	f.Add([]byte{0, 0, 0x75, 0x30})
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := ParseFEState(b); err == nil {
			if again, err := ParseFEState(s.MarshalFullData()); err != nil || again != s {
				t.Fatalf("FEState %v -> %v, %v", s, again, err)
			}
		}
		if v, err := ParseUint32FullData(b); err == nil && !reflect.DeepEqual(Uint32FullData(v), b) {
			t.Fatal("uint32 re-encoding differs")
		}
		ParseCEHBPolicy(b)
		ParseFEHBPolicy(b)
		if p, err := ParseSupportedLFB(b); err == nil {
			if _, err := p.AppendFullData(nil); err != nil {
				t.Fatal(err)
			}
		}
		if p, err := ParsePortInfo(b); err == nil {
			if _, err := p.AppendFullData(nil); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// BenchmarkCodecPerEntry measures the whole codec path of a route, both
// ends: BuildConfig, MarshalBinary, Parse, Items and ParseIPv4PrefixInfo.
func BenchmarkCodecPerEntry(b *testing.B) {
	const n = 10_000
	ops := make([]TableOp, n)
	for i := range ops {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		ops[i] = TableOp{
			Op: OpSet, ClassID: ClassIPv4UcastLPM, InstanceID: 1, Path: []uint32{CompIPv4PrefixTable, uint32(i)},
			FullData: IPv4PrefixInfo{Prefix: netip.PrefixFrom(a, 32), HopSelector: uint32(i % 7)}.MarshalFullData(),
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var buf []byte
	for i := 0; i < b.N; i++ {
		msgs, err := BuildConfig(Header{Src: testCE, Dst: testFE}, nil, ops)
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		for _, m := range msgs {
			if buf, err = m.AppendBinary(buf[:0]); err != nil {
				b.Fatal(err)
			}
			p, err := Parse(buf)
			if err != nil {
				b.Fatal(err)
			}
			for _, it := range Items(p) {
				if _, err := ParseIPv4PrefixInfo(it.FullData); err != nil {
					b.Fatal(err)
				}
				got++
			}
		}
		if got != n {
			b.Fatalf("decoded %d routes, want %d", got, n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
}

func FuzzParseECMPGroupInfo(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 2})
	f.Add(make([]byte, 4*MaxECMPMembers))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := ParseECMPGroupInfo(b)
		if err != nil {
			return
		}
		if out, err := g.AppendFullData(nil); err != nil || !reflect.DeepEqual(out, b) {
			t.Fatalf("re-encoding differs (%v):\n%x\n%x", err, b, out)
		}
	})
}
