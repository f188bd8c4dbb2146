package forces

// The port table a splitplane FE exposes: RFC 6956 models each port as an
// EtherPHYCop instance with its own components; splitplane also offers all
// ports at once, as one splitplane-specific table component of EtherPHYCop
// instance 1, so the CE learns them with one GET. Rows are PortInfo.
const (
	PortTableClass     = ClassEtherPHYCop
	PortTableInstance  = 1
	PortTableComponent = 1000

	// FEStatusComponent, beside the port table, is the FE's status as a
	// JSON document (splitplane's fe.Status: datapath counters in total and
	// per CPU, ports with their counters, lanes), read-only, for management
	// (the API's FE listing); at most MaxTLVLen bytes.
	FEStatusComponent = 1001
)
