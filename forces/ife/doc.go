// Package ife encodes and decodes the frames the inter-FE LFB of RFC 8013
// sends between the forwarding elements (FEs) of one router: the original
// Ethernet frame behind an outer Ethernet header of EtherType 0xED3E and a
// list of metadata TLVs that tell the receiving FE what to do with it (at
// least which of its ports to send it out of).
//
// # Layout
//
// Offsets are from the start of the frame; every multi-byte field is
// big-endian (network order).
//
//		 0                   1                   2                   3
//		 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//		+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//		|              Outer destination MAC (bytes 0-5)                |  0
//		+                               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//		|                               |                               |  4
//		+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+  Outer source MAC (6-11)      +
//		|                                                               |  8
//		+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//		|     EtherType 0xED3E (12-13)  |   Metadata length (14-15)     | 12
//		+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//		|        TLV type               |        TLV length             | 16
//		+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//		|   value (TLV length - 4 bytes), zero-padded to 4 bytes        |
//		+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//		~                  more TLVs, each 4-byte aligned               ~
//		+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//		|  original frame: inner dst MAC, src MAC, EtherType, payload   |
//		~  (at offset 14 + metadata length)                             ~
//		+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
//	  - Outer header: the destination is the receiving FE's MAC on the
//	    inter-FE link, the source the sending FE's; EtherType 0xED3E.
//	  - Metadata length (16 bits) counts itself: 2 plus every TLV with its
//	    padding. So the inner frame starts at 14 + metadata length, and a
//	    frame without metadata has length 2. Linux's ife_encode writes
//	    metalen + IFE_METAHDRLEN and ife_decode pulls the outer header plus
//	    this length.
//	  - TLV type (16 bits): the metadata ID; see the Type constants.
//	  - TLV length (16 bits) counts the 4-byte TLV header and the value but
//	    not the padding (ForCES's convention, RFC 5810; Linux's
//	    ife_tlv_meta_encode writes dlen + NLA_HDRLEN): a 32-bit value has
//	    length 8, a 16-bit one length 6 followed by 2 bytes of padding. The
//	    next TLV starts at the length rounded up to 4. A length below 4 or
//	    whose padded end passes the metadata's end is malformed; Linux drops
//	    such a frame (__ife_tlv_meta_valid), and Decode rejects it.
//	  - Original frame: the packet as it would leave the egress port's
//	    Ethernet interface, its own Ethernet header included (Linux requires
//	    at least 14 bytes of it).
//
// # Unknown metadata
//
// A receiver passes over a TLV whose type it does not know and still
// delivers the frame: Linux's tcf_ife_decode walks every TLV and decodes
// only those it has an op for. Decode therefore returns every TLV, unknown
// types included, in wire order, and leaves ignoring them to the caller; only
// the value size of the types this package knows is checked (a 3-byte egress
// port is an error, not a port).
//
// # Type numbers
//
// RFC 8013 carries ForCES metadata IDs in the 16-bit TLV type, but the
// ForCES registry's private-use range (0x80000000 and up, RFC 6956) does
// not fit in 16 bits, and Linux, the one implementation in the field,
// numbers its own (IFE_META_SKBMARK 1 to IFE_META_TCINDEX 5), clashing with
// RFC 6956's IDs 1 to 5. splitplane's metadata therefore use:
//
//   - TypeFlowHash = 2, Linux's IFE_META_HASHID: the same meaning (a hash of
//     the flow, for spreading) and the same u32 encoding, so reusing it is
//     the right call: a Linux sender's hash is a hash to us, and a Linux
//     receiver reads ours as what it is.
//   - TypeEgressPort = 0x5350, TypeIngressFE = 0x5351, TypeEgressFE = 0x5352
//     and TypeNexthopKey = 0x5353 ("SP" and on), a block
//     neither Linux nor RFC 6956 uses, because their meaning is neither's:
//     RFC 6956's PHYPortID (1) would be Linux's skb mark, so a Linux sender
//     marking packets would steer them to a port of ours by accident.
//     Distinct numbers make an unknown-to-us frame fail safe (no egress
//     port: dropped, see One) instead of misdirected.
//   - TypeProbe = 0x5354, in the same block: a liveness probe of an inter-FE
//     link (Probe, EncodeProbe, DecodeProbe; probe.go), which the peer's
//     datapath answers, in a frame of its own (ProbeFrameLen bytes).
//
// # Overhead
//
// Overhead(meta) = 14 + 2 + the TLVs; each 32-bit metadatum takes 8 bytes,
// so an egress port alone costs 24 bytes and egress port, ingress FE and
// flow hash 40. An inter-FE link must have an MTU of at least LinkMTU: the
// ports' MTU plus Overhead (the inner Ethernet header rides as payload where
// the outer one is not counted), 1524 or 1540 for 1500-byte ports.
//
// # Allocation
//
// Encode appends to a caller's buffer and Decode appends the metadata to a
// caller's slice, their values and the inner frame aliasing the input: with
// reused buffers neither allocates (see the benchmarks). Errors wrap the
// package's sentinel errors and name the field, its offset and its value.
//
// # Sources
//
// The layout follows RFC 8013's description of the Ethernet encapsulation
// and was checked field by field against Linux's implementation
// (net/ife/ife.c, net/sched/act_ife.c, include/uapi/linux/ife.h) and
// Scapy's IFE layer (scapy/contrib/ife.py); TestLinuxDecodesOurFrames
// checks it against a running kernel where CONFIG_NET_ACT_IFE is built.
// The RFC's own text could not be read in full from this workplace: what
// is said above of it (the length field counting itself, metadata IDs in
// the TLV type, unknown metadata passed over) is the author's reading of
// it, and every rule the code enforces is one Linux enforces too.
package ife
