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
