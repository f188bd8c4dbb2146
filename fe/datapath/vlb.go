//go:build linux

package datapath

import "fmt"

// FEDemand is the traffic this FE sent encapsulated to one egress FE, over
// the direct link or through an intermediate, since the datapath loaded:
// the load this FE puts on the mesh for that FE (fe_demand_map). Bytes
// count the whole frames, outer header and metadata included.
type FEDemand struct {
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// InterFEDemand returns the demand towards each peer FE that has an
// inter-FE link declared, keyed by FE ID.
func (d *Datapath) InterFEDemand() (map[uint32]FEDemand, error) {
	d.ifeMu.Lock()
	peers := make([]uint32, 0, len(d.ife.links))
	for fe := range d.ife.links {
		peers = append(peers, fe)
	}
	d.ifeMu.Unlock()

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	out := make(map[uint32]FEDemand, len(peers))
	var perCPU []xdpFeDemand
	for _, fe := range peers {
		if err := d.objs.FeDemand.Lookup(fe, &perCPU); err != nil {
			return nil, fmt.Errorf("read demand towards FE %d: %w", fe, err)
		}
		var v FEDemand
		for _, c := range perCPU {
			v.Packets += c.Packets
			v.Bytes += c.Bytes
		}
		out[fe] = v
	}
	return out, nil
}
