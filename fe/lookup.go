package fe

import (
	"net/netip"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/forces"
)

// lookupDatapath is a datapath that can say what it does with a packet to
// an address, read from its fast-path tables (the real one can).
type lookupDatapath interface {
	Lookup(addrs []netip.Addr) ([]datapath.Lookup, error)
}

// fibLookup answers a GET of forces.FIBLookupComponent: the datapath's own
// answer for the key's address, with the gateway of a remote nexthop (which
// the datapath does not hold) from the FE's slots.
func (a *Agent) fibLookup(k *forces.KeyInfo) ([]byte, forces.ResultCode) {
	addr, err := forces.ParseLookupKey(k)
	if err != nil {
		return nil, forces.ResultInvalidParameters
	}
	var dp Datapath
	a.do(func() { dp = a.prog.dp })
	ld, ok := dp.(lookupDatapath)
	if !ok {
		return nil, forces.ResultNotSupported
	}
	ls, err := ld.Lookup([]netip.Addr{addr})
	if err != nil {
		return nil, forces.ResultInternalError
	}
	l := ls[0]
	out := forces.FIBLookup{Kind: forces.FIBLookupKind(l.Kind), ID: l.ID}
	for _, h := range l.Hops {
		fh := forces.FIBLookupHop{ID: h.ID, Gateway: h.Gateway, Port: uint32(h.Ifindex), Resolved: h.DstMAC != nil}
		copy(fh.SrcMAC[:], h.SrcMAC)
		copy(fh.DstMAC[:], h.DstMAC)
		if h.Remote != nil {
			fh.Port, fh.RemoteFE, fh.RemotePort = 0, h.Remote.FE, h.Remote.Port
			a.do(func() {
				if s := a.prog.slotByID[h.ID]; s != nil && !s.gw.IsUnspecified() {
					fh.Gateway = s.gw
				}
			})
		}
		out.Hops = append(out.Hops, fh)
	}
	b, err := out.MarshalFullData()
	if err != nil {
		return nil, forces.ResultInternalError
	}
	return b, forces.ResultSuccess
}
