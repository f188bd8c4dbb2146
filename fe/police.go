package fe

import (
	"fmt"
	"strings"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/forces"
)

// The policer's classes in the configuration (classifier.police) and the
// rates the datapath gets from it.

// PoliceConfig sets the policer's rate of each class of the packets the XDP
// program hands to the kernel; a class left out takes its default from
// police_pps and police_burst (see each class). With police_pps 0, a class
// left out is not policed.
type PoliceConfig struct {
	// ToRouter polices the packets addressed to the router that are not
	// a learned control flow: pings, new BGP or SSH connections, ...
	// (counted drop_policed). Default: police_pps, police_burst.
	ToRouter *PoliceRate `yaml:"to_router"`
	// TTLOptions polices the packets handed to the kernel for an expiring
	// TTL (hop limit), IPv4 options or an IPv6 Hop-by-Hop header
	// (drop_policed_ttl_options). Default: police_pps and police_burst,
	// at most 1000 and 100: the kernel sends at most
	// net.ipv4.icmp_msgs_per_sec (1000 by default, for all CPUs together,
	// ICMPv6 included) ICMP errors a second, so more expiring packets only
	// cost it work, and a traceroute sends a few probes per hop.
	TTLOptions *PoliceRate `yaml:"ttl_options"`
	// ARPND polices ARP and IPv6 neighbour and router discovery
	// (drop_policed_arp_nd). Default: police_pps and police_burst, at
	// most 1000 and 100: a neighbour is resolved once and then refreshed
	// about once per reachable time (30 s by default), so a segment of a
	// thousand hosts sends the router some tens of packets a second, and
	// 1000 leaves room for a burst of resolutions after a link comes up,
	// while an ARP flood reaches the kernel at a twentieth of the lab's
	// police_pps.
	ARPND *PoliceRate `yaml:"arp_nd"`
	// Other polices the rest: packets without a route, to neighbours
	// being resolved, broadcast and multicast, ... (drop_policed_other).
	// Default: police_pps, police_burst.
	Other *PoliceRate `yaml:"other"`
}

// PoliceRate is the rate of one policer class, per CPU: a token bucket of
// burst packets refilled at pps packets per second; excess is dropped.
type PoliceRate struct {
	// PPS is the rate in packets per second per CPU, 1 to 1000000000.
	PPS uint64 `yaml:"pps"`
	// Burst is the bucket size in packets, 1 to 1073741824 (a tenth of
	// pps by default, at least 1).
	Burst uint64 `yaml:"burst"`
}

// Caps of the default rate and burst of the small classes (ttl_options,
// arp_nd); see PoliceConfig.
const (
	smallClassPPS   = 1000
	smallClassBurst = 100
)

// policeClasses are the classes as the configuration names them, in the
// datapath's order, with their field.
var policeClasses = [datapath.PoliceClasses]struct {
	class datapath.PoliceClass
	field func(*PoliceConfig) *PoliceRate
}{
	{datapath.PoliceToRouter, func(p *PoliceConfig) *PoliceRate { return p.ToRouter }},
	{datapath.PoliceTTLOptions, func(p *PoliceConfig) *PoliceRate { return p.TTLOptions }},
	{datapath.PoliceARPND, func(p *PoliceConfig) *PoliceRate { return p.ARPND }},
	{datapath.PoliceOther, func(p *PoliceConfig) *PoliceRate { return p.Other }},
}

// validatePolice checks police_pps, police_burst and the classes, filling
// in the default bursts.
func (c *ClassifierConfig) validatePolice() error {
	if c.PolicePPS > datapath.MaxPoliceRate {
		return fmt.Errorf("%w: classifier.police_pps %d: want at most %d packets per second per CPU (0: no policing)", ErrConfig, c.PolicePPS, uint64(datapath.MaxPoliceRate))
	}
	if c.PoliceBurst > datapath.MaxPoliceBurst {
		return fmt.Errorf("%w: classifier.police_burst %d: want at most %d packets", ErrConfig, c.PoliceBurst, uint64(datapath.MaxPoliceBurst))
	}
	if c.PolicePPS > 0 && c.PoliceBurst == 0 {
		c.PoliceBurst = max(c.PolicePPS/10, 1)
	}
	for _, pc := range policeClasses {
		r := pc.field(&c.Police)
		if r == nil {
			continue
		}
		key := "classifier.police." + pc.class.String()
		if r.PPS < 1 || r.PPS > datapath.MaxPoliceRate {
			return fmt.Errorf("%w: %s.pps %d: want 1 to %d packets per second per CPU (leave the class out for its default)", ErrConfig, key, r.PPS, uint64(datapath.MaxPoliceRate))
		}
		if r.Burst > datapath.MaxPoliceBurst {
			return fmt.Errorf("%w: %s.burst %d: want 1 to %d packets", ErrConfig, key, r.Burst, uint64(datapath.MaxPoliceBurst))
		}
		if r.Burst == 0 {
			r.Burst = max(r.PPS/10, 1)
		}
	}
	return nil
}

// policeRates returns the rate of each class: the class's own, or its
// default from police_pps and police_burst (PPS 0, not policed, when
// police_pps is 0). c is validated.
func (c *ClassifierConfig) policeRates() datapath.PoliceRates {
	var out datapath.PoliceRates
	for _, pc := range policeClasses {
		if r := pc.field(&c.Police); r != nil {
			out[pc.class] = datapath.PoliceRate{PPS: r.PPS, Burst: r.Burst}
			continue
		}
		if c.PolicePPS == 0 {
			continue
		}
		r := datapath.PoliceRate{PPS: c.PolicePPS, Burst: c.PoliceBurst}
		if pc.class == datapath.PoliceTTLOptions || pc.class == datapath.PoliceARPND {
			r.PPS, r.Burst = min(r.PPS, smallClassPPS), min(r.Burst, smallClassBurst)
		}
		out[pc.class] = r
	}
	return out
}

// policeStatus is rates as the FE's status reports them.
func policeStatus(rates datapath.PoliceRates) forces.FEPoliceStatus {
	st := func(c datapath.PoliceClass) forces.FEPoliceRate {
		return forces.FEPoliceRate{PPS: rates[c].PPS, Burst: rates[c].Burst}
	}
	return forces.FEPoliceStatus{
		ToRouter: st(datapath.PoliceToRouter), TTLOptions: st(datapath.PoliceTTLOptions),
		ARPND: st(datapath.PoliceARPND), Other: st(datapath.PoliceOther),
	}
}

// policeString is rates for a log line: "to_router 20000/2000 ttl_options
// 1000/100 ..." (pps/burst per CPU), "off" for a class not policed.
func policeString(rates datapath.PoliceRates) string {
	var b strings.Builder
	for c, r := range rates {
		if c > 0 {
			b.WriteByte(' ')
		}
		if r.PPS == 0 {
			fmt.Fprintf(&b, "%s off", datapath.PoliceClass(c))
			continue
		}
		fmt.Fprintf(&b, "%s %d/%d", datapath.PoliceClass(c), r.PPS, r.Burst)
	}
	return b.String()
}

// clone returns a copy of p that shares no class with it.
func (p PoliceConfig) clone() PoliceConfig {
	cp := func(r *PoliceRate) *PoliceRate {
		if r == nil {
			return nil
		}
		c := *r
		return &c
	}
	return PoliceConfig{ToRouter: cp(p.ToRouter), TTLOptions: cp(p.TTLOptions), ARPND: cp(p.ARPND), Other: cp(p.Other)}
}
