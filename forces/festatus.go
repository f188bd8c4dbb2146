package forces

import (
	"fmt"
	"net/netip"
)

// FIBKeptComponent, beside the port table (PortTableClass, instance 1), is a
// read-only boolean: whether the FE's datapath still held, when the current
// association began, the FIB an earlier association had programmed (the FE
// kept forwarding through the CE's absence). A CE asks for it at discovery
// and claims its forwarding state preserved after a restart (graceful
// restart, RFC 4724) only when every FE answers true. An FE started afresh,
// with an empty datapath, answers false; one that does not know the
// component answers E_COMPONENT_DOES_NOT_EXIST, which a CE takes for false.
const FIBKeptComponent = 1002

// BoolFullData returns the FULLDATA value of a boolean component: one byte,
// 0 or 1, and three bytes of padding (see UcharFullData).
func BoolFullData(v bool) []byte { return UcharFullData(boolByte(v)) }

// ParseBoolFullData decodes a boolean FULLDATA value (1 byte, or 4 with
// zero padding), refusing anything but 0 and 1.
func ParseBoolFullData(b []byte) (bool, error) {
	v, err := ParseUcharFullData(b)
	if err != nil {
		return false, err
	}
	if v > 1 {
		return false, fmt.Errorf("%w: boolean value %d", ErrMalformed, v)
	}
	return v == 1, nil
}

// FEStatus is the document a splitplane FE returns for FEStatusComponent: a
// snapshot for operators, encoded as JSON. It is defined here, beside the
// component, so that the CE and the management API decode what the FE sends
// without importing the FE or its datapath.
type FEStatus struct {
	ID         string `json:"id"`
	Associated bool   `json:"associated"`
	CE         string `json:"ce"`
	// FIBKept says whether the datapath still held an earlier
	// association's routes when the current (or last) one began: what the
	// FE reports as FIBKeptComponent.
	FIBKept bool           `json:"fib_kept"`
	Ports   []FEPortStatus `json:"ports"`
	// Routes and Nexthops count the CE's rows; Programmed the routes in the
	// datapath (a route whose nexthop row is missing, or that a connected
	// route shadows, is not); Gateways the distinct next hops and Resolved
	// those whose egress port is known.
	Routes     int `json:"routes"`
	Nexthops   int `json:"nexthops"`
	Programmed int `json:"programmed_routes"`
	Gateways   int `json:"gateways"`
	Resolved   int `json:"gateways_resolved"`
	Neighbors  int `json:"neighbors"`
	// InterFELinks are the FE's ports that link it to other FEs, with
	// their state; EgressRows counts the CE's nexthop egress rows the FE
	// holds, RemoteNexthops those whose egress FE is another FE.
	InterFELinks   []FEInterFELinkStatus `json:"inter_fe_links,omitempty"`
	EgressRows     int                   `json:"egress_rows"`
	RemoteNexthops int                   `json:"remote_nexthops"`
	DatapathErrors uint64                `json:"datapath_errors"`
	Lanes          []FELane              `json:"lanes"`
	Low            FELowStatus           `json:"low_channel"`
	KernelRoutes   int                   `json:"kernel_routes"`
	KernelErrors   uint64                `json:"kernel_route_errors"`
	ProtocolErrors uint64                `json:"protocol_errors"`
	Counters       FECounters            `json:"counters"`
	// Classifier: the control flows steered, policing and GTSM (nil: off).
	Classifier *FEClassifierStatus `json:"classifier,omitempty"`
	// VLB: the spreading of inter-FE traffic (nil: no inter-FE links).
	VLB *FEVLBStatus `json:"vlb,omitempty"`
	// PerCPU are the same counters for each CPU: which core did the work.
	PerCPU []FECounters `json:"counters_per_cpu"`
	// ConnectedRows counts the CE's connected egress rows the FE holds,
	// RemoteConnected the subnets of other FEs' ports it forwards to over
	// the inter-FE links (a datapath route each).
	ConnectedRows   int `json:"connected_rows"`
	RemoteConnected int `json:"remote_connected"`
}

// FEInterFELinkStatus is one inter-FE link of the FE in its status: its
// port and the FE at the other end.
type FEInterFELinkStatus struct {
	Port    string `json:"port"`
	Ifindex int    `json:"ifindex"`
	PeerFE  uint32 `json:"peer_fe"`
	Up      bool   `json:"up"` // the port's link
	// PeerMAC is the peer's MAC on the link once learned; Declared, that
	// the datapath has the link (it needs the MAC).
	PeerMAC  string `json:"peer_mac,omitempty"`
	Declared bool   `json:"declared"`
	// Alive: the peer's datapath answers the link's probes (a declared
	// link; the datapath uses it when Up and Alive). ProbesSent and
	// ProbesAnswered count the probes; LastRTTMicros is the last reply's
	// round trip.
	Alive          bool    `json:"alive"`
	ProbesSent     uint64  `json:"probes_sent"`
	ProbesAnswered uint64  `json:"probes_answered"`
	LastRTTMicros  float64 `json:"last_rtt_us,omitempty"`
}

// FEVLBStatus is how the FE spreads its traffic to the other FEs over the
// inter-FE links (Valiant load balancing, fe/vlb.go).
type FEVLBStatus struct {
	Mode        string            `json:"mode"`
	MaxLinkLoad float64           `json:"max_link_load"`
	Links       []FEVLBLinkStatus `json:"links"`
}

// FEVLBLinkStatus is one inter-FE link under VLB: its capacity, what this
// FE sends on it (own traffic and transit) and towards its peer by any
// path, as last measured, and the share of the flows towards the peer
// sent through intermediates, in thousandths.
type FEVLBLinkStatus struct {
	PeerFE        uint32  `json:"peer_fe"`
	Port          string  `json:"port"`
	CapacityMbps  float64 `json:"capacity_mbps"`
	LinkMbps      float64 `json:"link_mbps"`
	DemandMbps    float64 `json:"demand_mbps"`
	SpillPermille int     `json:"spill_permille"`
}

// FECounters are the datapath's packet counters by name: "rx", "forwarded",
// a "pass_*" name for each reason to pass a packet to the kernel,
// "to_control_cpu", and a "drop_*" name for each reason to drop one.
type FECounters map[string]uint64

// FEPortStatus is one port of the FE in its status.
type FEPortStatus struct {
	Name    string         `json:"name"`
	Ifindex int            `json:"ifindex"`
	MAC     string         `json:"mac"`
	Addrs   []netip.Prefix `json:"addresses"`
	Mode    string         `json:"xdp_mode"`
	Up      bool           `json:"up"`
	// Counters are the XDP program's packets and bytes on this port.
	Counters FEPortCounters `json:"counters"`
	// RedirectLost counts the frames the XDP program sent out of this port
	// (a veth in native mode) that the kernel dropped: the veth's peer has
	// neither XDP nor GRO (fe/vethcheck.go).
	RedirectLost uint64 `json:"redirect_lost,omitempty"`
}

// FEPortCounters are the fast path's counters of one port since it was
// attached.
type FEPortCounters struct {
	RxPackets uint64 `json:"rx_packets"`
	RxBytes   uint64 `json:"rx_bytes"`
	TxPackets uint64 `json:"tx_packets"`
	TxBytes   uint64 `json:"tx_bytes"`
	Passed    uint64 `json:"passed"`
	Dropped   uint64 `json:"dropped"`
}

// FELane is one receive queue of a port and where it is served.
type FELane struct {
	Port  string `json:"port"`
	Queue int    `json:"queue"`
	CPUs  string `json:"cpus"` // a CPU list such as "0-1" or "1"; "sender" for softirq on the sending CPU
	Via   string `json:"via"`  // "irq N", "threaded napi", or "softirq"
}

// FELowStatus is the low-priority channel (redirected and injected frames,
// events) in the FE's status.
type FELowStatus struct {
	Up         bool   `json:"up"`
	Redirected uint64 `json:"redirected_packets"`
	Dropped    uint64 `json:"dropped_redirects"`
	Injected   uint64 `json:"injected_packets"`
	Events     uint64 `json:"events"`
}

// FEClassifierStatus is what the FE's classifier is doing.
type FEClassifierStatus struct {
	ControlCPU  int    `json:"control_cpu"`
	Steering    string `json:"steering"`     // "xdp cpumap to CPU N", "none"
	ForwardCPUs []int  `json:"forward_cpus"` // forwarding spread over these CPUs; empty: where packets arrive
	// NICs say, per port, what its NIC can do (n-tuple rules, RSS
	// indirection, queues, IRQs) and so which path steers there.
	NICs      []string       `json:"nics"`
	PolicePPS uint64         `json:"police_pps"`
	GTSMPeers []string       `json:"gtsm_peers"`
	Rules     []FEFlowStatus `json:"rules"`
	Errors    uint64         `json:"errors"`
	// Police is the policer's rate of each class, as applied (a class's
	// own or its default from police_pps); PPS 0: not policed.
	Police FEPoliceStatus `json:"police"`
}

// FEPoliceStatus is the FE policer's rate of each class (its
// classifier.police).
type FEPoliceStatus struct {
	ToRouter   FEPoliceRate `json:"to_router"`
	TTLOptions FEPoliceRate `json:"ttl_options"`
	ARPND      FEPoliceRate `json:"arp_nd"`
	Other      FEPoliceRate `json:"other"`
}

// FEPoliceRate is one policer class's rate, per CPU: packets per second
// (0: not policed) and bucket size in packets.
type FEPoliceRate struct {
	PPS   uint64 `json:"pps"`
	Burst uint64 `json:"burst"`
}

// FEFlowStatus is one control flow the FE's datapath steers to the control
// CPU.
type FEFlowStatus struct {
	Kind    string `json:"kind"`
	Local   string `json:"local"`
	Remote  string `json:"remote"`
	Packets uint64 `json:"packets"` // its return packets the datapath steered
	// BadChecksum counts the packets among Packets passed unsteered
	// because their TCP checksum did not verify (its share of the
	// datapath's pass_steer_bad_csum).
	BadChecksum uint64 `json:"pass_steer_bad_csum"`
}
