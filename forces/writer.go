package forces

import (
	"encoding/binary"
	"fmt"
)

// ConfigWriter encodes row operations straight into the wire form of Config
// messages, with no Message tree in between: the one Config packer, used for
// the CE's bulk path (a full table is a million rows) and, through
// BuildConfig, wherever Message values are wanted. Consecutive rows of one
// LFB and operation share an LFBselect and an operation TLV, and every
// message and its Config Response (a RESULT-TLV per path, see
// NewConfigResponse) fit the 16-bit TLV and message length limits.
//
// Add appends a row; Flush closes the open message and returns the encoded
// messages. The returned bytes stay valid until the next Add after Flush.
type ConfigWriter struct {
	// MaxMessage caps the size of each message (and of its response), in
	// bytes; 0 or more than MaxMessageLen means MaxMessageLen. Smaller
	// messages let a heartbeat written between them overtake sooner.
	MaxMessage int

	hdr   Header
	begin func(*Header) // sets each message's correlator (and anything else)

	buf  []byte
	ends []int // end offset of each closed message in buf
	out  [][]byte

	open            bool // a message is open
	msgAt, lfbAt    int  // offsets of the open message and LFBselect
	opAt            int  // offset of the open operation TLV
	class, instance uint32
	op              OpType
	reqMsg, respMsg int // bytes of the open message and of its response
	reqLFB, respLFB int // TLV lengths of the open LFBselect and its response
}

// NewConfigWriter returns a writer of Config messages with header hdr (Type
// and Version are set). begin, if not nil, is called with each new message's
// header before it is written: the place to set its correlator and flags.
func NewConfigWriter(hdr Header, begin func(*Header)) *ConfigWriter {
	hdr.Type, hdr.Version = MsgConfig, ProtocolVersion
	return &ConfigWriter{hdr: hdr, begin: begin}
}

// Add appends one row operation: op (OpSet with fullData, or OpDel with
// nil) on path of LFB class and instance. Neither path nor fullData is
// retained. An operation that cannot be encoded is an error wrapping
// ErrInvalid or ErrTooLarge, and nothing is added.
func (w *ConfigWriter) Add(op OpType, class, instance uint32, path []uint32, fullData []byte) error {
	switch {
	case op == 0:
		return fmt.Errorf("%w: operation type 0", ErrInvalid)
	case op == OpSet && fullData == nil:
		return fmt.Errorf("%w: SET without FullData", ErrInvalid)
	case len(path) > 0xFFFF:
		return fmt.Errorf("%w: %d path IDs", ErrTooLarge, len(path))
	case fullData != nil && 4+len(fullData) > MaxTLVLen:
		return fmt.Errorf("%w: FULLDATA of %d bytes", ErrTooLarge, len(fullData))
	}
	pl := pathOverhead + 4*len(path)
	rpl := pl + resultTLVLen
	if fullData != nil {
		pl += 4 + (len(fullData)+3)&^3
	}
	maxMsg := MaxMessageLen
	if w.MaxMessage > 0 && w.MaxMessage < MaxMessageLen {
		maxMsg = w.MaxMessage
	}
	fits := func(extra int) bool {
		return w.reqLFB+extra+pl <= MaxTLVLen && w.respLFB+extra+rpl <= MaxTLVLen &&
			w.reqMsg+extra+pl <= maxMsg && w.respMsg+extra+rpl <= maxMsg
	}
	switch {
	case w.open && w.class == class && w.instance == instance && w.op == op && fits(0):
		w.reqLFB, w.respLFB, w.reqMsg, w.respMsg = w.reqLFB+pl, w.respLFB+rpl, w.reqMsg+pl, w.respMsg+rpl
	case w.open && w.class == class && w.instance == instance && w.op != op && fits(opOverhead):
		w.endOp()
		w.beginOp(op)
		w.reqLFB, w.respLFB = w.reqLFB+opOverhead+pl, w.respLFB+opOverhead+rpl
		w.reqMsg, w.respMsg = w.reqMsg+opOverhead+pl, w.respMsg+opOverhead+rpl
	default:
		need, rneed := lfbOverhead+opOverhead+pl, lfbOverhead+opOverhead+rpl
		if need > MaxTLVLen || rneed > MaxTLVLen {
			return fmt.Errorf("%w: the operation does not fit in one LFBselect-TLV", ErrTooLarge)
		}
		if w.open {
			w.endOp()
			w.endLFB()
		}
		if !w.open || w.reqMsg+need > maxMsg || w.respMsg+rneed > maxMsg {
			if err := w.beginMessage(); err != nil {
				return err
			}
		}
		w.lfbAt = len(w.buf)
		w.buf = append(w.buf, byte(TLVLFBSelect>>8), byte(TLVLFBSelect&0xFF), 0, 0)
		w.buf = binary.BigEndian.AppendUint32(w.buf, class)
		w.buf = binary.BigEndian.AppendUint32(w.buf, instance)
		w.class, w.instance = class, instance
		w.beginOp(op)
		w.reqLFB, w.respLFB = need, rneed
		w.reqMsg, w.respMsg = w.reqMsg+need, w.respMsg+rneed
	}

	b := w.buf
	at := len(b)
	b = append(b, byte(TLVPathData>>8), byte(TLVPathData&0xFF), 0, 0, 0, 0, byte(len(path)>>8), byte(len(path)))
	for _, id := range path {
		b = binary.BigEndian.AppendUint32(b, id)
	}
	if fullData != nil {
		l := 4 + len(fullData)
		b = append(b, byte(TLVFullData>>8), byte(TLVFullData&0xFF), byte(l>>8), byte(l))
		b = append(b, fullData...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	binary.BigEndian.PutUint16(b[at+2:], uint16(len(b)-at))
	w.buf = b
	return nil
}

func (w *ConfigWriter) beginOp(op OpType) {
	w.op, w.opAt = op, len(w.buf)
	w.buf = append(w.buf, byte(op>>8), byte(op), 0, 0)
}

func (w *ConfigWriter) endOp() {
	binary.BigEndian.PutUint16(w.buf[w.opAt+2:], uint16(len(w.buf)-w.opAt))
}

func (w *ConfigWriter) endLFB() {
	binary.BigEndian.PutUint16(w.buf[w.lfbAt+2:], uint16(len(w.buf)-w.lfbAt))
}

// beginMessage closes the open message, if any, and starts a new one.
func (w *ConfigWriter) beginMessage() error {
	w.endMessage()
	h := w.hdr
	if w.begin != nil {
		w.begin(&h)
	}
	flags, err := h.Flags.encode()
	if err != nil {
		return err
	}
	w.msgAt = len(w.buf)
	w.buf = append(w.buf, ProtocolVersion<<4, byte(MsgConfig), 0, 0)
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(h.Src))
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(h.Dst))
	w.buf = binary.BigEndian.AppendUint64(w.buf, h.Correlator)
	w.buf = binary.BigEndian.AppendUint32(w.buf, flags)
	w.open, w.reqMsg, w.respMsg = true, HeaderLen, HeaderLen
	return nil
}

// endMessage closes the open message's operation, LFBselect and header.
func (w *ConfigWriter) endMessage() {
	if !w.open {
		return
	}
	w.endOp()
	w.endLFB()
	binary.BigEndian.PutUint16(w.buf[w.msgAt+2:], uint16((len(w.buf)-w.msgAt)/4))
	w.ends = append(w.ends, len(w.buf))
	w.open = false
}

// Flush closes the open message and returns every message written since the
// last Flush, each a complete encoded Config. The next Add reuses the
// writer's buffer.
func (w *ConfigWriter) Flush() [][]byte {
	w.endMessage()
	w.out = w.out[:0]
	start := 0
	for _, end := range w.ends {
		w.out = append(w.out, w.buf[start:end:end])
		start = end
	}
	w.buf, w.ends = w.buf[:0], w.ends[:0]
	return w.out
}
