// Package forces implements the IETF ForCES protocol (RFC 5810) as used
// between splitplane's control element (CE) and forwarding element (FE):
// the binary message codec, the RFC 5812 / RFC 6956 LFB numbering and row
// encodings the router needs, batching of large table updates into Config
// messages, and a TCP transport mapping layer (TML).
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
package forces
