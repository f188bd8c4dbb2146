// Package packed encodes route operations compactly, for the packed_ops
// field of Routes.Bulk's RouteBatch and of Routes.Transaction's request: a
// program that pushes many routes saves the API the cost of a protobuf
// message and two address strings per route (about a third of the CE's work
// per route in a bulk load).
//
// The encoding is a sequence of operations, each
//
//	kind      1 byte   1 replace (add or replace the API's route), 2 delete
//	family    1 byte   4 (IPv4) or 6 (IPv6)
//	length    1 byte   prefix length, 0-32 or 0-128
//	address   4 or 16 bytes, the prefix (host bits clear)
//
// and for a replace, after that
//
//	distance  1 byte   administrative distance, 0 for the API's default
//	count     1 byte   number of next hops, 1-16
//	next hops count addresses of the prefix's family, 4 or 16 bytes each
//
// with every multi-byte field in network byte order. The CE checks the
// decoded operations as it checks the others (next hops usable, and so on).
package packed

import (
	"fmt"
	"net/netip"
)

// Kind is an operation's kind, with the values of RouteOp.Kind.
type Kind uint8

// The kinds of operation.
const (
	Replace Kind = 1
	Delete  Kind = 2
)

// MaxNextHops is the most next hops an operation can carry (ECMP of 16).
const MaxNextHops = 16

// Op is one decoded operation.
type Op struct {
	Kind     Kind
	Prefix   netip.Prefix
	NextHops []netip.Addr // Replace only
	Distance uint8        // Replace only; 0: the API's default
}

// AppendReplace appends a replace of prefix p's API route, through hops at
// distance (0: the API's default), to b.
func AppendReplace(b []byte, p netip.Prefix, hops []netip.Addr, distance uint8) ([]byte, error) {
	if err := checkPrefix(p); err != nil {
		return b, err
	}
	if len(hops) == 0 || len(hops) > MaxNextHops {
		return b, fmt.Errorf("%s: %d next hops, want 1 to %d", p, len(hops), MaxNextHops)
	}
	for _, h := range hops {
		if !h.IsValid() || h.Is4() != p.Addr().Is4() || h.Is4In6() {
			return b, fmt.Errorf("%s: next hop %s is not of the prefix's family", p, h)
		}
	}
	b, err := appendPrefix(b, Replace, p)
	if err != nil {
		return b, err
	}
	b = append(b, distance, byte(len(hops)))
	for _, h := range hops {
		b = appendAddr(b, h)
	}
	return b, nil
}

// AppendDelete appends a delete of prefix p's API route to b.
func AppendDelete(b []byte, p netip.Prefix) ([]byte, error) {
	return appendPrefix(b, Delete, p)
}

func checkPrefix(p netip.Prefix) error {
	switch {
	case !p.IsValid() || p.Addr().Zone() != "" || p.Addr().Is4In6():
		return fmt.Errorf("prefix %s: not an IPv4 or IPv6 prefix", p)
	case p.Masked() != p:
		return fmt.Errorf("prefix %s: host bits set (want %s)", p, p.Masked())
	}
	return nil
}

func appendPrefix(b []byte, k Kind, p netip.Prefix) ([]byte, error) {
	if err := checkPrefix(p); err != nil {
		return b, err
	}
	fam := byte(6)
	if p.Addr().Is4() {
		fam = 4
	}
	b = append(b, byte(k), fam, byte(p.Bits()))
	return appendAddr(b, p.Addr()), nil
}

func appendAddr(b []byte, a netip.Addr) []byte {
	if a.Is4() {
		v := a.As4()
		return append(b, v[:]...)
	}
	v := a.As16()
	return append(b, v[:]...)
}

// Error is an operation that cannot be decoded: its index, where it starts
// in the bytes, the field and why.
type Error struct {
	Index  int    // of the operation
	Offset int    // of the operation's first byte
	Field  string // kind, family, length, address, distance, count, next_hops[i]
	Value  string // what was there ("" when the bytes ended)
	Why    string
}

func (e *Error) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("operation %d (byte %d): %s: %s", e.Index, e.Offset, e.Field, e.Why)
	}
	return fmt.Sprintf("operation %d (byte %d): %s %s: %s", e.Index, e.Offset, e.Field, e.Value, e.Why)
}

// Decode decodes every operation of b. The operations' next hops share one
// array; both are allocated once, at their final size.
func Decode(b []byte) ([]Op, error) {
	nOps, nHops := count(b)
	ops := make([]Op, 0, nOps)
	hops := make([]netip.Addr, 0, nHops)
	for i, off := 0, 0; off < len(b); i++ {
		op, n, err := decodeOne(b[off:], &hops)
		if err != nil {
			err.Index, err.Offset = i, off
			return nil, err
		}
		ops = append(ops, op)
		off += n
	}
	return ops, nil
}

// count returns about how many operations and next hops b holds (at most
// one operation more), from their sizes alone; decodeOne checks the rest.
func count(b []byte) (ops, hops int) {
	for off := 0; off < len(b); ops++ {
		op := b[off:]
		if len(op) < 3 || op[1] != 4 && op[1] != 6 || op[0] != byte(Replace) && op[0] != byte(Delete) {
			break // decodeOne names the problem
		}
		size := 4
		if op[1] == 6 {
			size = 16
		}
		n, h := 3+size, 0
		if op[0] == byte(Replace) {
			if len(op) < n+2 {
				break
			}
			h = int(op[n+1])
			n += 2 + h*size
		}
		if n > len(op) {
			break // so hops never exceeds what the bytes can hold
		}
		hops += h
		off += n
	}
	return ops + 1, hops
}

// decodeOne decodes the operation at the start of b, appending its next
// hops to *hops, and returns it with its size.
func decodeOne(b []byte, hops *[]netip.Addr) (Op, int, *Error) {
	short := func(field string) *Error { return &Error{Field: field, Why: "the bytes end inside it"} }
	op := Op{Kind: Kind(b[0])} // b is never empty
	if op.Kind != Replace && op.Kind != Delete {
		return Op{}, 0, &Error{Field: "kind", Value: fmt.Sprint(b[0]), Why: "want 1 (replace) or 2 (delete)"}
	}
	if len(b) < 2 {
		return Op{}, 0, short("family")
	}
	size, maxBits := 0, 0
	switch b[1] {
	case 4:
		size, maxBits = 4, 32
	case 6:
		size, maxBits = 16, 128
	default:
		return Op{}, 0, &Error{Field: "family", Value: fmt.Sprint(b[1]), Why: "want 4 or 6"}
	}
	if len(b) < 3 {
		return Op{}, 0, short("length")
	}
	if int(b[2]) > maxBits {
		return Op{}, 0, &Error{Field: "length", Value: fmt.Sprint(b[2]), Why: fmt.Sprintf("want 0 to %d", maxBits)}
	}
	n := 3
	if len(b) < n+size {
		return Op{}, 0, short("address")
	}
	a := addrAt(b[n:], size)
	n += size
	op.Prefix = netip.PrefixFrom(a, int(b[2]))
	if op.Prefix.Masked() != op.Prefix {
		return Op{}, 0, &Error{Field: "address", Value: op.Prefix.String(), Why: "host bits set (want " + op.Prefix.Masked().String() + ")"}
	}
	if op.Kind == Delete {
		return op, n, nil
	}
	if len(b) < n+2 {
		return Op{}, 0, short([...]string{"distance", "count"}[len(b)-n])
	}
	op.Distance, n = b[n], n+1
	count := int(b[n])
	n++
	if count == 0 || count > MaxNextHops {
		return Op{}, 0, &Error{Field: "count", Value: fmt.Sprint(count), Why: fmt.Sprintf("want 1 to %d", MaxNextHops)}
	}
	if len(b) < n+count*size {
		return Op{}, 0, short(fmt.Sprintf("next_hops[%d]", (len(b)-n)/size))
	}
	start := len(*hops)
	for range count {
		*hops = append(*hops, addrAt(b[n:], size))
		n += size
	}
	op.NextHops = (*hops)[start:len(*hops):len(*hops)]
	return op, n, nil
}

func addrAt(b []byte, size int) netip.Addr {
	if size == 4 {
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrFrom16([16]byte(b[:16]))
}
