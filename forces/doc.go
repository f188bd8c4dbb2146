// Package forces implements the IETF ForCES protocol (RFC 5810) as used
// between splitplane's control element (CE) and forwarding element (FE):
// the binary message codec, the RFC 5812 / RFC 6956 LFB numbering and row
// encodings the router needs, batching of large table updates into Config
// messages, Query / Query Response / Event Notification and two-phase-commit
// helpers, Packet Redirect with RFC 6956 metadata, the FE Object and FE
// Protocol LFB components a CE uses to discover an FE and set its heartbeat
// policy, a TCP transport mapping layer (TML) with message timeouts, mutual
// TLS and a tap, and a pcap writer for looking at the exchange in Wireshark.
//
// Beside RFC 6956's LFBs, splitplane defines its own, with class IDs above
// 65535: ECMP groups (ecmp.go, 65537/65538) and, for several FEs sharing one
// port space, the nexthop egress rows (egress.go, 65539/65540: per nexthop
// row, the FE and port its gateway is behind) and the FE's inter-FE link
// table (a component beside its port table).
//
// The codec is strict: Parse rejects anything that is not a well-formed
// message (wrong version, length mismatch, truncated or overlong TLVs,
// missing padding, illegal nesting) with an error wrapping one of the
// package's sentinel errors, never panics, and never allocates more than a
// small multiple of the input size.
//
// Sources. Message, TLV and operation type numbers, header flag positions,
// RESULT-TLV codes and the ASResult/ASTreason values were checked against
// the IANA "Forwarding and Control Element Separation (ForCES)" registry and
// two independent protocol dissectors. The FE/CE ID partition, the RFC 6956
// LFB class IDs and component IDs, and the FULLDATA packing of struct rows
// could not be checked against the RFC text from this workplace; they follow
// the RFCs as best known to the author and are marked as such where defined.
// The LFB class IDs 1-17 were later confirmed against a copy of the IANA LFB
// class registry. The ILV length rule (header included), the empty COMMIT and
// TRCOMP operations and the RESULT-TLV directly inside COMMIT-RESPONSE follow
// tcpdump's ForCES printer; the FE Object and FE Protocol component IDs and
// the RFC 6956 metadata IDs are from the author's knowledge of the RFCs.
// Wireshark's ForCES dissector (4.0) misreads top-level TLV lengths and more;
// see TestTsharkInterop for the list and how the test works around it.
package forces
