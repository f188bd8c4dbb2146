package forces

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package wraps one of them.
var (
	// ErrMalformed reports a message or TLV that does not follow RFC 5810's layout.
	ErrMalformed = errors.New("forces: malformed message")
	// ErrVersion reports a common header whose version is not 1.
	ErrVersion = errors.New("forces: unsupported protocol version")
	// ErrLength reports a common header Length that disagrees with the bytes present.
	ErrLength = errors.New("forces: message length mismatch")
	// ErrTooLarge reports a TLV or message that exceeds its 16-bit length field.
	ErrTooLarge = errors.New("forces: message or TLV too large")
	// ErrTooDeep reports PATH-DATA nesting beyond MaxPathDepth, or a path
	// longer than MaxPathIDs.
	ErrTooDeep = errors.New("forces: PATH-DATA nested too deep")
	// ErrInvalid reports a Message value that cannot be encoded as given.
	ErrInvalid = errors.New("forces: invalid message contents")
)

// Wire limits of RFC 5810.
const (
	// ProtocolVersion is the only ForCES protocol version (RFC 5810 §6.1).
	ProtocolVersion = 1
	// HeaderLen is the size in bytes of the common header.
	HeaderLen = 24
	// MaxMessageWords is the largest value of the header's Length field.
	MaxMessageWords = 0xFFFF
	// MaxMessageLen is the largest message in bytes.
	MaxMessageLen = MaxMessageWords * 4
	// MaxTLVLen is the largest TLV length (type, length and value, without padding).
	MaxTLVLen = 0xFFFF
	// MaxPathDepth bounds PATH-DATA recursion; deeper messages are rejected.
	// RFC 6956's LFBs need three levels (table, row, field); eight leaves
	// room and bounds the work a hostile message can ask for.
	MaxPathDepth = 8
	// MaxPathIDs bounds the IDs on the way from an operation to a leaf
	// PATH-DATA (all its ancestors' and its own): every leaf's Item carries
	// that whole path, so the bound keeps flattening a message (Items)
	// linear in its size. RFC 6956 paths hold a handful.
	MaxPathIDs = 32
)

// ID is a ForCES source or destination ID (RFC 5810 §4.2.1.3, §6.1). The two
// top bits (TS) partition the space.
//
// Note: RFC 5810 assigns TS=0b00 (0x00000000-0x3FFFFFFF) to FEs and TS=0b01
// (0x40000000-0x7FFFFFFF) to CEs; both the tcpdump and Wireshark ForCES
// dissectors agree. That order is what this package implements.
type ID uint32

// Special IDs and ranges of RFC 5810.
const (
	fePrefix  ID = 0x00000000
	cePrefix  ID = 0x40000000
	subIDMask    = 0x3FFFFFFF

	// MulticastFirst and MulticastLast bound the multicast ID range.
	MulticastFirst ID = 0xC0000000
	MulticastLast  ID = 0xFFFFFFEF
	// AllCEsBroadcast addresses every CE.
	AllCEsBroadcast ID = 0xFFFFFFFD
	// AllFEsBroadcast addresses every FE.
	AllFEsBroadcast ID = 0xFFFFFFFE
	// AllBroadcast addresses every CE and FE.
	AllBroadcast ID = 0xFFFFFFFF
)

// FEID returns the FE ID with sub-ID n; bits of n above the low 30 are dropped.
func FEID(n uint32) ID { return fePrefix | ID(n&subIDMask) }

// CEID returns the CE ID with sub-ID n; bits of n above the low 30 are dropped.
func CEID(n uint32) ID { return cePrefix | ID(n&subIDMask) }

// IsFE reports whether id lies in the FE range.
func (id ID) IsFE() bool { return id>>30 == 0 }

// IsCE reports whether id lies in the CE range.
func (id ID) IsCE() bool { return id>>30 == 1 }

// IsMulticast reports whether id lies in the multicast range.
func (id ID) IsMulticast() bool { return id >= MulticastFirst && id <= MulticastLast }

// IsBroadcast reports whether id is one of the three broadcast IDs.
func (id ID) IsBroadcast() bool { return id >= AllCEsBroadcast }

// String formats id as its kind and sub-ID, e.g. "FE(1)" or "CE(0)".
func (id ID) String() string {
	switch {
	case id.IsFE():
		return fmt.Sprintf("FE(%d)", uint32(id)&subIDMask)
	case id.IsCE():
		return fmt.Sprintf("CE(%d)", uint32(id)&subIDMask)
	case id == AllCEsBroadcast:
		return "AllCEs"
	case id == AllFEsBroadcast:
		return "AllFEs"
	case id == AllBroadcast:
		return "All"
	case id.IsMulticast():
		return fmt.Sprintf("Multicast(%#08x)", uint32(id))
	}
	return fmt.Sprintf("Reserved(%#08x)", uint32(id))
}

// MessageType is the common header's Message Type (IANA "Message Types").
type MessageType uint8

// Message types of RFC 5810.
const (
	MsgAssociationSetup         MessageType = 0x01
	MsgAssociationTeardown      MessageType = 0x02
	MsgConfig                   MessageType = 0x03
	MsgQuery                    MessageType = 0x04
	MsgEventNotification        MessageType = 0x05
	MsgPacketRedirect           MessageType = 0x06
	MsgHeartbeat                MessageType = 0x0F
	MsgAssociationSetupResponse MessageType = 0x11
	MsgConfigResponse           MessageType = 0x13
	MsgQueryResponse            MessageType = 0x14
)

// String returns the RFC 5810 name of t.
func (t MessageType) String() string {
	switch t {
	case MsgAssociationSetup:
		return "AssociationSetup"
	case MsgAssociationTeardown:
		return "AssociationTeardown"
	case MsgConfig:
		return "Config"
	case MsgQuery:
		return "Query"
	case MsgEventNotification:
		return "EventNotification"
	case MsgPacketRedirect:
		return "PacketRedirect"
	case MsgHeartbeat:
		return "Heartbeat"
	case MsgAssociationSetupResponse:
		return "AssociationSetupResponse"
	case MsgConfigResponse:
		return "ConfigResponse"
	case MsgQueryResponse:
		return "QueryResponse"
	}
	return fmt.Sprintf("MessageType(%#02x)", uint8(t))
}

// ACKFlag is the header's 2-bit ACK indicator.
type ACKFlag uint8

// ACK indicator values.
const (
	NoACK      ACKFlag = 0
	SuccessACK ACKFlag = 1
	FailureACK ACKFlag = 2
	AlwaysACK  ACKFlag = 3
)

// String returns the RFC 5810 name of a.
func (a ACKFlag) String() string {
	switch a {
	case NoACK:
		return "NoACK"
	case SuccessACK:
		return "SuccessACK"
	case FailureACK:
		return "FailureACK"
	case AlwaysACK:
		return "AlwaysACK"
	}
	return fmt.Sprintf("ACKFlag(%d)", uint8(a))
}

// ExecMode is the header's 2-bit execution mode (EM).
type ExecMode uint8

// Execution modes; 0 is reserved.
const (
	ExecReserved          ExecMode = 0
	ExecAllOrNone         ExecMode = 1
	ExecUntilFailure      ExecMode = 2
	ExecContinueOnFailure ExecMode = 3
)

// String returns the RFC 5810 name of e.
func (e ExecMode) String() string {
	switch e {
	case ExecReserved:
		return "reserved"
	case ExecAllOrNone:
		return "execute-all-or-none"
	case ExecUntilFailure:
		return "execute-until-failure"
	case ExecContinueOnFailure:
		return "continue-execute-on-failure"
	}
	return fmt.Sprintf("ExecMode(%d)", uint8(e))
}

// TransactionPhase is the header's 2-bit transaction phase (TP).
type TransactionPhase uint8

// Transaction phases.
const (
	PhaseSOT TransactionPhase = 0 // start of transaction
	PhaseMOT TransactionPhase = 1 // middle of transaction
	PhaseEOT TransactionPhase = 2 // end of transaction
	PhaseABT TransactionPhase = 3 // abort
)

// String returns the RFC 5810 abbreviation of p.
func (p TransactionPhase) String() string {
	switch p {
	case PhaseSOT:
		return "SOT"
	case PhaseMOT:
		return "MOT"
	case PhaseEOT:
		return "EOT"
	case PhaseABT:
		return "ABT"
	}
	return fmt.Sprintf("TransactionPhase(%d)", uint8(p))
}

// TLV types (IANA "TLV Types").
const (
	TLVRedirect     uint16 = 0x0001
	TLVASResult     uint16 = 0x0010
	TLVASTReason    uint16 = 0x0011
	TLVPathData     uint16 = 0x0110
	TLVKeyInfo      uint16 = 0x0111
	TLVFullData     uint16 = 0x0112
	TLVSparseData   uint16 = 0x0113
	TLVResult       uint16 = 0x0114
	TLVMetadata     uint16 = 0x0115
	TLVRedirectData uint16 = 0x0116
	TLVLFBSelect    uint16 = 0x1000
)

// OpType is an operation TLV type (IANA "Operation Selection (OPER-TLV) Types").
type OpType uint16

// Operation TLV types.
const (
	OpSet             OpType = 0x1
	OpSetProp         OpType = 0x2
	OpSetResponse     OpType = 0x3
	OpSetPropResponse OpType = 0x4
	OpDel             OpType = 0x5
	OpDelResponse     OpType = 0x6
	OpGet             OpType = 0x7
	OpGetProp         OpType = 0x8
	OpGetResponse     OpType = 0x9
	OpGetPropResponse OpType = 0xA
	OpReport          OpType = 0xB
	OpCommit          OpType = 0xC
	OpCommitResponse  OpType = 0xD
	OpTRComp          OpType = 0xE
)

// Response returns the operation type that answers o (SET -> SET-RESPONSE,
// DEL -> DEL-RESPONSE, ...), or o itself when o has no response type.
func (o OpType) Response() OpType {
	switch o {
	case OpSet:
		return OpSetResponse
	case OpSetProp:
		return OpSetPropResponse
	case OpDel:
		return OpDelResponse
	case OpGet:
		return OpGetResponse
	case OpGetProp:
		return OpGetPropResponse
	case OpCommit:
		return OpCommitResponse
	}
	return o
}

// String returns the RFC 5810 name of o.
func (o OpType) String() string {
	switch o {
	case OpSet:
		return "SET"
	case OpSetProp:
		return "SET-PROP"
	case OpSetResponse:
		return "SET-RESPONSE"
	case OpSetPropResponse:
		return "SET-PROP-RESPONSE"
	case OpDel:
		return "DEL"
	case OpDelResponse:
		return "DEL-RESPONSE"
	case OpGet:
		return "GET"
	case OpGetProp:
		return "GET-PROP"
	case OpGetResponse:
		return "GET-RESPONSE"
	case OpGetPropResponse:
		return "GET-PROP-RESPONSE"
	case OpReport:
		return "REPORT"
	case OpCommit:
		return "COMMIT"
	case OpCommitResponse:
		return "COMMIT-RESPONSE"
	case OpTRComp:
		return "TRCOMP"
	}
	return fmt.Sprintf("OpType(%#x)", uint16(o))
}

// ResultCode is the 8-bit code of a RESULT-TLV (IANA "RESULT-TLV Result Values").
type ResultCode uint8

// RESULT-TLV codes. 0x18-0xFE are unassigned.
const (
	ResultSuccess               ResultCode = 0x00
	ResultInvalidHeader         ResultCode = 0x01
	ResultLengthMismatch        ResultCode = 0x02
	ResultVersionMismatch       ResultCode = 0x03
	ResultInvalidDestinationPID ResultCode = 0x04
	ResultLFBUnknown            ResultCode = 0x05
	ResultLFBNotFound           ResultCode = 0x06
	ResultLFBInstanceIDNotFound ResultCode = 0x07
	ResultInvalidPath           ResultCode = 0x08
	ResultComponentDoesNotExist ResultCode = 0x09
	ResultExists                ResultCode = 0x0A
	ResultNotFound              ResultCode = 0x0B
	ResultReadOnly              ResultCode = 0x0C
	ResultInvalidArrayCreation  ResultCode = 0x0D
	ResultValueOutOfRange       ResultCode = 0x0E
	ResultContentsTooLong       ResultCode = 0x0F
	ResultInvalidParameters     ResultCode = 0x10
	ResultInvalidMessageType    ResultCode = 0x11
	ResultInvalidFlags          ResultCode = 0x12
	ResultInvalidTLV            ResultCode = 0x13
	ResultEventError            ResultCode = 0x14
	ResultNotSupported          ResultCode = 0x15
	ResultMemoryError           ResultCode = 0x16
	ResultInternalError         ResultCode = 0x17
	ResultUnspecifiedError      ResultCode = 0xFF
)

var resultNames = [...]string{
	"SUCCESS", "INVALID_HEADER", "LENGTH_MISMATCH", "VERSION_MISMATCH",
	"INVALID_DESTINATION_PID", "LFB_UNKNOWN", "LFB_NOT_FOUND",
	"LFB_INSTANCE_ID_NOT_FOUND", "INVALID_PATH", "COMPONENT_DOES_NOT_EXIST",
	"EXISTS", "NOT_FOUND", "READ_ONLY", "INVALID_ARRAY_CREATION",
	"VALUE_OUT_OF_RANGE", "CONTENTS_TOO_LONG", "INVALID_PARAMETERS",
	"INVALID_MESSAGE_TYPE", "INVALID_FLAGS", "INVALID_TLV", "EVENT_ERROR",
	"NOT_SUPPORTED", "MEMORY_ERROR", "INTERNAL_ERROR",
}

// String returns the RFC 5810 name of r without its "E_" prefix.
func (r ResultCode) String() string {
	if int(r) < len(resultNames) {
		return resultNames[r]
	}
	if r == ResultUnspecifiedError {
		return "UNSPECIFIED_ERROR"
	}
	return fmt.Sprintf("ResultCode(%#02x)", uint8(r))
}

// SetupResult is the 32-bit value of an ASResult-TLV.
type SetupResult uint32

// Association Setup results.
const (
	SetupSuccess          SetupResult = 0
	SetupFEIDInvalid      SetupResult = 1
	SetupPermissionDenied SetupResult = 2
)

// String returns the RFC 5810 description of r.
func (r SetupResult) String() string {
	switch r {
	case SetupSuccess:
		return "success"
	case SetupFEIDInvalid:
		return "FE ID invalid"
	case SetupPermissionDenied:
		return "permission denied"
	}
	return fmt.Sprintf("SetupResult(%d)", uint32(r))
}

// TeardownReason is the 32-bit value of an ASTreason-TLV.
type TeardownReason uint32

// Association Teardown reasons.
const (
	TeardownNormal           TeardownReason = 0
	TeardownLossOfHeartbeats TeardownReason = 1
	TeardownOutOfBandwidth   TeardownReason = 2
	TeardownOutOfMemory      TeardownReason = 3
	TeardownApplicationCrash TeardownReason = 4
	TeardownUnspecified      TeardownReason = 255
)

// String returns the RFC 5810 description of r.
func (r TeardownReason) String() string {
	switch r {
	case TeardownNormal:
		return "normal teardown by administrator"
	case TeardownLossOfHeartbeats:
		return "error - loss of heartbeats"
	case TeardownOutOfBandwidth:
		return "error - out of bandwidth"
	case TeardownOutOfMemory:
		return "error - out of memory"
	case TeardownApplicationCrash:
		return "error - application crash"
	case TeardownUnspecified:
		return "error - other or unspecified"
	}
	return fmt.Sprintf("TeardownReason(%d)", uint32(r))
}
