package forces

// The port table a splitplane FE exposes: RFC 6956 models each port as an
// EtherPHYCop instance with its own components; splitplane also offers all
// ports at once, as one splitplane-specific table component of EtherPHYCop
// instance 1, so the CE learns them with one GET. Rows are PortInfo.
const (
	PortTableClass     = ClassEtherPHYCop
	PortTableInstance  = 1
	PortTableComponent = 1000
)
