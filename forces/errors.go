package forces

import "errors"

// IsProtocolError reports whether err says the peer sent something that is
// not valid ForCES (as opposed to the connection failing or timing out): a
// bad header, length, TLV, nesting, or a message too large or too slow.
func IsProtocolError(err error) bool {
	for _, e := range []error{ErrMalformed, ErrVersion, ErrLength, ErrTooLarge, ErrTooDeep, ErrInvalid, ErrMessageTimeout} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Message priorities (the header's 3-bit Priority, 7 highest) and the TML
// channel they travel on. Association, heartbeats, configuration and queries
// are high priority; events and redirected packets low, so a flood of the
// latter can never delay the former (each has its own connection).
const (
	PriorityAssociation = 7
	PriorityConfig      = 6
	PriorityEvent       = 2
	PriorityRedirect    = 1

	// LowPriorityBelow: messages with a lower priority use the low-priority channel.
	LowPriorityBelow = 4
)

// PriorityOf is the priority splitplane gives a message type.
func PriorityOf(t MessageType) uint8 {
	switch t {
	case MsgAssociationSetup, MsgAssociationSetupResponse, MsgAssociationTeardown, MsgHeartbeat:
		return PriorityAssociation
	case MsgEventNotification:
		return PriorityEvent
	case MsgPacketRedirect:
		return PriorityRedirect
	}
	return PriorityConfig
}
