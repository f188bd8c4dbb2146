package fe

import (
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/forces"
)

// The FE's Prometheus metrics. A scrape reads the agent's tables under its
// lock and the datapath's counters (BPF per-CPU maps) as Status does;
// nothing is polled in between. Each agent has its own registry.

// RegisterMetrics adds col to the metrics the agent serves on metrics_listen
// (the gRPC API server's per-method stats, say); it fails if col's series
// collide with others.
func (a *Agent) RegisterMetrics(col prometheus.Collector) error { return a.prom.Register(col) }

// MetricsHandler serves the agent's metrics, as /metrics of metrics_listen
// does.
func (a *Agent) MetricsHandler() http.Handler { return a.prom.Handler() }

// MetricsAddr is the address metrics are served on, nil until Run listens
// there or without metrics_listen.
func (a *Agent) MetricsAddr() net.Addr { return a.prom.Addr() }

// feCollector reads the agent and its datapath at each scrape.
type feCollector struct{ a *Agent }

var (
	feCounterErrors = prometheus.NewDesc("splitplane_fe_datapath_counter_errors",
		"Error reading the datapath's counters for this scrape.", nil, nil)

	feAssociated = prometheus.NewDesc("splitplane_fe_forces_associated",
		"1 while the FE is associated with its CE over ForCES.", nil, nil)
	feLowUp = prometheus.NewDesc("splitplane_fe_forces_low_channel_up",
		"1 while the low-priority ForCES channel (redirects, events) is up.", nil, nil)
	feProtocolErrors = prometheus.NewDesc("splitplane_fe_forces_protocol_errors_total",
		"Malformed, misaddressed, refused or unanswerable ForCES messages the FE received from the CE.", nil, nil)
	feRedirected = prometheus.NewDesc("splitplane_fe_redirected_packets_total",
		"Frames the FE redirected to the CE over the low-priority channel.", nil, nil)
	feRedirectDropped = prometheus.NewDesc("splitplane_fe_redirect_dropped_packets_total",
		"Frames to redirect to the CE that were dropped: queue full or no association.", nil, nil)
	feInjected = prometheus.NewDesc("splitplane_fe_injected_packets_total",
		"Frames the CE sent out of the FE's ports.", nil, nil)
	feEvents = prometheus.NewDesc("splitplane_fe_events_sent_total",
		"Event notifications the FE sent to the CE.", nil, nil)

	feRoutes = prometheus.NewDesc("splitplane_fe_fib_routes",
		"Routes the CE programmed into the FE (its ForCES rows), by address family.", []string{"family"}, nil)
	feNexthops = prometheus.NewDesc("splitplane_fe_fib_nexthops",
		"Next hops the CE programmed into the FE (its ForCES rows), by address family.", []string{"family"}, nil)
	feGroups = prometheus.NewDesc("splitplane_fe_fib_ecmp_groups",
		"ECMP groups the CE programmed into the FE (its ForCES rows), by address family.", []string{"family"}, nil)
	feProgrammed = prometheus.NewDesc("splitplane_fe_datapath_routes",
		"Routes in the datapath, by address family (a route whose next hop is missing, or that a connected route shadows, is not).", []string{"family"}, nil)
	feGateways = prometheus.NewDesc("splitplane_fe_datapath_gateways",
		"Distinct gateways (next-hop slots) in the datapath.", nil, nil)
	feResolved = prometheus.NewDesc("splitplane_fe_datapath_gateways_resolved",
		"Gateways whose egress port is known (a port of this FE, or of another FE for a remote nexthop).", nil, nil)
	feDPGroups = prometheus.NewDesc("splitplane_fe_datapath_ecmp_groups",
		"ECMP groups in the datapath.", nil, nil)
	feNeighbors = prometheus.NewDesc("splitplane_fe_neighbors",
		"Neighbour (ARP, NDP) entries the FE knows on its ports.", nil, nil)
	feDPErrors = prometheus.NewDesc("splitplane_fe_datapath_errors_total",
		"Datapath updates that failed (map full, ...).", nil, nil)
	feKernelRoutes = prometheus.NewDesc("splitplane_fe_kernel_routes",
		"CE routes the FE copied into the kernel's FIB (the slow path).", nil, nil)
	feKernelErrors = prometheus.NewDesc("splitplane_fe_kernel_route_errors_total",
		"Kernel FIB updates that failed.", nil, nil)

	feRx = prometheus.NewDesc("splitplane_fe_datapath_rx_packets_total",
		"Packets the XDP program received, by CPU. Each counts once more in splitplane_fe_datapath_packets_total.", []string{"cpu"}, nil)
	fePackets = prometheus.NewDesc("splitplane_fe_datapath_packets_total",
		"Packets the XDP program handled, by CPU, action (forward, pass to the kernel) and reason (the datapath's counter name, such as forwarded or pass_no_route).",
		[]string{"cpu", "action", "reason"}, nil)
	feFwdBytes = prometheus.NewDesc("splitplane_fe_datapath_forwarded_bytes_total",
		"Frame bytes the XDP program forwarded, by CPU.", []string{"cpu"}, nil)
	feFwd6 = prometheus.NewDesc("splitplane_fe_datapath_forwarded_ipv6_packets_total",
		"IPv6 packets among those forwarded, by CPU.", []string{"cpu"}, nil)

	fePortUp = prometheus.NewDesc("splitplane_fe_port_up",
		"1 when the port's link is up.", []string{"port"}, nil)
	fePortRx = prometheus.NewDesc("splitplane_fe_port_rx_packets_total",
		"Packets received on the port since XDP was attached.", []string{"port"}, nil)
	fePortRxBytes = prometheus.NewDesc("splitplane_fe_port_rx_bytes_total",
		"Frame bytes (without FCS) received on the port since XDP was attached.", []string{"port"}, nil)
	fePortTx = prometheus.NewDesc("splitplane_fe_port_tx_packets_total",
		"Packets the XDP program forwarded out of the port.", []string{"port"}, nil)
	fePortTxBytes = prometheus.NewDesc("splitplane_fe_port_tx_bytes_total",
		"Frame bytes (without FCS) the XDP program forwarded out of the port.", []string{"port"}, nil)
	fePortPassed = prometheus.NewDesc("splitplane_fe_port_passed_packets_total",
		"Packets received on the port that XDP passed to the kernel.", []string{"port"}, nil)
	fePortRedirectLost = prometheus.NewDesc("splitplane_fe_port_redirect_lost_packets_total",
		"Packets XDP forwarded out of the port (a veth) that the kernel dropped: the veth's peer has neither XDP nor GRO.", []string{"port"}, nil)

	feFIBChunks = prometheus.NewDesc("splitplane_fe_datapath_fib_chunks",
		"The IPv4 FIB's /16s by how a lookup finds them: one entry for the whole /16 (leaf), a block of range entries of 16 or 32 bits (ranges16, ranges32), or DIR-24-8 when the /16 did not fit the range table (dir24_8).",
		[]string{"form"}, nil)
	feFIBBytes = prometheus.NewDesc("splitplane_fe_datapath_fib_lookup_bytes",
		"Bytes of the IPv4 FIB an XDP lookup can read (the range table, and DIR-24-8 for the /16s it holds).", nil, nil)

	feLinkAlive = prometheus.NewDesc("splitplane_fe_inter_fe_link_alive",
		"1 when the inter-FE link's peer FE answers its probes (its datapath runs) and the link is declared.", []string{"port", "peer_fe"}, nil)
)

// Describe implements prometheus.Collector.
func (fc *feCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{feCounterErrors, feAssociated, feLowUp, feProtocolErrors, feRedirected, feRedirectDropped,
		feInjected, feEvents, feRoutes, feNexthops, feGroups, feProgrammed, feGateways, feResolved, feDPGroups, feNeighbors,
		feDPErrors, feKernelRoutes, feKernelErrors, feRx, fePackets, feFwdBytes, feFwd6,
		fePortUp, fePortRx, fePortRxBytes, fePortTx, fePortTxBytes, fePortPassed, feLinkAlive, fePortRedirectLost, feFIBChunks, feFIBBytes} {
		ch <- d
	}
}

// metricsPort is what a scrape needs of a port.
type metricsPort struct {
	name    string
	ifindex int
	up      bool
}

// Collect implements prometheus.Collector.
func (fc *feCollector) Collect(ch chan<- prometheus.Metric) {
	a := fc.a
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}

	associated := a.associated.Load()
	neighbors := a.neighbors.len()
	var routes4, routes6, nh4, nh6, grp4, grp6, prog4, prog6, gateways, dpGroups, resolved, kernelRoutes int
	var dpErrors, kernelErrors uint64
	var kernel bool
	var ports []metricsPort
	var links []forces.FEInterFELinkStatus
	var dp Datapath
	a.do(func() {
		routes4, routes6 = a.table.v4.len(), a.table.v6.len()
		nh4, nh6 = len(a.table.v4.nexthops), len(a.table.v6.nexthops)
		grp4, grp6 = len(a.table.v4.groups), len(a.table.v6.groups)
		prog4, prog6 = a.prog.routes.len(), a.prog.routes6.len()
		gateways, dpGroups, dpErrors = len(a.prog.slots), len(a.prog.groups), a.prog.errors
		for _, s := range a.prog.slots {
			if s.resolved() {
				resolved++
			}
		}
		kernel = a.prog.kernel != nil
		if kernel {
			ks := a.prog.kernel.stats()
			kernelRoutes, kernelErrors = ks.routes, ks.errors
		}
		ports = make([]metricsPort, 0, len(a.ports))
		for _, p := range a.ports {
			ports = append(ports, metricsPort{p.Name, p.Ifindex, p.Up})
		}
		links = a.linkStatus()
		dp = a.prog.dp
	})
	sort.Slice(ports, func(i, j int) bool { return ports[i].ifindex < ports[j].ifindex })

	gauge(feAssociated, b2f(associated))
	gauge(feLowUp, b2f(a.lowq.Load() != nil))
	counter(feProtocolErrors, a.protocolErrors.Load())
	counter(feRedirected, a.low.redirected.Load())
	counter(feRedirectDropped, a.low.dropped.Load())
	counter(feInjected, a.low.injected.Load())
	counter(feEvents, a.low.events.Load())

	gauge(feRoutes, float64(routes4), "ipv4")
	gauge(feRoutes, float64(routes6), "ipv6")
	gauge(feNexthops, float64(nh4), "ipv4")
	gauge(feNexthops, float64(nh6), "ipv6")
	gauge(feGroups, float64(grp4), "ipv4")
	gauge(feGroups, float64(grp6), "ipv6")
	gauge(feProgrammed, float64(prog4), "ipv4")
	gauge(feProgrammed, float64(prog6), "ipv6")
	gauge(feGateways, float64(gateways))
	gauge(feResolved, float64(resolved))
	gauge(feDPGroups, float64(dpGroups))
	gauge(feNeighbors, float64(neighbors))
	counter(feDPErrors, dpErrors)
	if kernel {
		gauge(feKernelRoutes, float64(kernelRoutes))
		counter(feKernelErrors, kernelErrors)
	}
	for _, p := range ports {
		gauge(fePortUp, b2f(p.up), p.name)
	}
	for _, l := range links {
		gauge(feLinkAlive, b2f(l.Alive), l.Port, strconv.FormatUint(uint64(l.PeerFE), 10))
	}
	if dp == nil {
		return // not loaded yet
	}

	if fs, ok := dp.(interface {
		FIBStats() (datapath.FIBStats, error)
	}); ok {
		if st, err := fs.FIBStats(); err == nil {
			gauge(feFIBChunks, float64(st.LeafChunks), "leaf")
			gauge(feFIBChunks, float64(st.ShortChunks), "ranges16")
			gauge(feFIBChunks, float64(st.RangeChunks-st.ShortChunks), "ranges32")
			gauge(feFIBChunks, float64(st.TBL24Chunks), "dir24_8")
			gauge(feFIBBytes, float64(st.LookupBytes))
		}
	}

	perCPU, err := dp.CPUCounters()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(feCounterErrors, fmt.Errorf("datapath per-CPU counters: %w", err))
	}
	for cpu, cs := range perCPU {
		if cs["rx"] == 0 {
			continue // a CPU that never saw a packet (often one only possible, not online)
		}
		c := strconv.Itoa(cpu)
		for name, v := range cs {
			switch {
			case name == "rx":
				counter(feRx, v, c)
			case name == "forwarded_bytes":
				counter(feFwdBytes, v, c)
			case name == "forwarded_ipv6":
				counter(feFwd6, v, c)
			case name == "forwarded":
				counter(fePackets, v, c, "forward", name)
			case strings.HasPrefix(name, "pass_"):
				counter(fePackets, v, c, "pass", name)
			case strings.HasPrefix(name, "drop"):
				counter(fePackets, v, c, "drop", name)
			default:
				counter(fePackets, v, c, "other", name)
			}
		}
	}

	pcs, err := dp.PortCounters()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(feCounterErrors, fmt.Errorf("datapath port counters: %w", err))
		return
	}
	for _, p := range ports {
		pc, ok := pcs[p.ifindex]
		if !ok {
			continue
		}
		counter(fePortRx, pc.RxPackets, p.name)
		counter(fePortRxBytes, pc.RxBytes, p.name)
		counter(fePortTx, pc.TxPackets, p.name)
		counter(fePortTxBytes, pc.TxBytes, p.name)
		counter(fePortPassed, pc.Passed, p.name)
		for _, v := range a.veths {
			if v.ifindex == p.ifindex {
				counter(fePortRedirectLost, v.lost.Load(), p.name)
			}
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
