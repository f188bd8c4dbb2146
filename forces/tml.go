package forces

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Conn is a ForCES TCP TML connection. The common header's Length makes the
// stream self-framing, so messages are written back to back with no extra
// prefix. Conn is safe for one reader and any number of concurrent writers.
// After ReadMessage returns an error other than io.EOF the stream is out of
// step and the connection should be closed.
type Conn struct {
	c   net.Conn
	r   *bufio.Reader
	hdr [HeaderLen]byte

	tap atomic.Pointer[func(raw []byte, sent bool)]

	// Read side, owned by the single reader except for the deadline, which
	// SetReadDeadline may change from another goroutine.
	msgTimeout atomic.Int64 // nanoseconds; 0 disables
	maxMsg     atomic.Int64 // bytes
	dmu        sync.Mutex
	readDL     time.Time // the caller's read deadline

	wmu      sync.Mutex
	wtimeout atomic.Int64 // nanoseconds each write may take; 0: unbounded
	wbuf     []byte
	woff     []int // message boundaries in wbuf, for the tap
}

// DefaultMessageTimeout is the time a Conn allows for the rest of a message
// to arrive once its first byte has (see SetMessageTimeout).
const DefaultMessageTimeout = 30 * time.Second

// ErrMessageTimeout reports a peer that started a message and did not finish
// it within the message timeout.
var ErrMessageTimeout = errors.New("forces: message not completed within the message timeout")

// NewConn wraps c.
func NewConn(c net.Conn) *Conn {
	cn := &Conn{c: c, r: bufio.NewReaderSize(c, 64<<10)}
	cn.msgTimeout.Store(int64(DefaultMessageTimeout))
	cn.maxMsg.Store(MaxMessageLen)
	return cn
}

// SetTap installs fn to be called with the exact bytes of every message read
// (sent false, before it is parsed, so malformed ones are seen too) and
// written (sent true, after the write succeeded), in stream order per
// direction. raw is only valid during the call and must not be modified. fn
// runs on the reading or writing goroutine, so it should be quick. A nil fn
// removes the tap; with none set, the cost is one atomic load per message.
func (c *Conn) SetTap(fn func(raw []byte, sent bool)) {
	if fn == nil {
		c.tap.Store(nil)
		return
	}
	c.tap.Store(&fn)
}

// SetMessageTimeout bounds how long ReadMessage waits for the rest of a
// message once its first byte has arrived, so that a peer sending a header
// and then trickling (or stopping) cannot hold the reader forever; the wait
// for the first byte is governed by the read deadline alone. d <= 0 disables
// the bound. The default is DefaultMessageTimeout.
func (c *Conn) SetMessageTimeout(d time.Duration) { c.msgTimeout.Store(int64(max(d, 0))) }

// SetMaxMessageSize caps the size of a message ReadMessage accepts, and so
// the bytes it buffers for one message; a header announcing more is rejected
// with ErrTooLarge before its body is read. n is clamped to
// [HeaderLen, MaxMessageLen]; the default is MaxMessageLen.
func (c *Conn) SetMaxMessageSize(n int) { c.maxMsg.Store(int64(min(max(n, HeaderLen), MaxMessageLen))) }

// SetWriteTimeout bounds every later write (WriteMessage, WriteMessages,
// WriteEncoded): each must complete within d of its start, or it fails with
// an error wrapping os.ErrDeadlineExceeded, so a peer that stops reading
// cannot hold a writer forever. d <= 0 removes the bound.
func (c *Conn) SetWriteTimeout(d time.Duration) { c.wtimeout.Store(int64(max(d, 0))) }

// armWrite sets the write deadline for a write starting now, if bounded.
func (c *Conn) armWrite() {
	if d := time.Duration(c.wtimeout.Load()); d > 0 {
		_ = c.c.SetWriteDeadline(time.Now().Add(d))
	}
}

// TryWriteMessage writes m within timeout unless another write holds the
// connection for more than a few milliseconds (writeGrace), when it gives up
// with ErrWriteBusy: for a last message (a teardown) that must not wait
// behind a write blocked on a peer that stopped reading.
func (c *Conn) TryWriteMessage(m *Message, timeout time.Duration) error {
	b, err := appendMessage(nil, m)
	if err != nil {
		return err
	}
	for start := time.Now(); !c.wmu.TryLock(); time.Sleep(time.Millisecond) {
		if time.Since(start) > writeGrace {
			return ErrWriteBusy
		}
	}
	defer c.wmu.Unlock()
	_ = c.c.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.c.Write(b); err != nil {
		return fmt.Errorf("forces: write: %w", err)
	}
	if tap := c.tap.Load(); tap != nil {
		(*tap)(b, true)
	}
	return nil
}

// writeGrace is how long TryWriteMessage waits for a write under way: one
// in progress to a reading peer ends well within it.
const writeGrace = 50 * time.Millisecond

// ErrWriteBusy is TryWriteMessage's answer when another write holds the
// connection.
var ErrWriteBusy = errors.New("forces: another write is under way")

// ReadMessage reads exactly one message. It validates the header (version,
// Length between 6 words and the maximum message size) before reading the
// body, so a peer can make it allocate at most that many bytes, and once the
// first byte of a message has arrived the rest must follow within the message
// timeout, or ReadMessage fails with an error wrapping ErrMessageTimeout. It
// returns io.EOF when the stream ends cleanly between messages and an error
// wrapping io.ErrUnexpectedEOF when it ends inside one.
func (c *Conn) ReadMessage() (*Message, error) {
	return c.ReadMessageInto(nil)
}

// ReadMessageInto is ReadMessage reading into mb's memory (nil: fresh
// memory): the message returned is valid until mb is used again.
func (c *Conn) ReadMessageInto(mb *MessageBuffer) (*Message, error) {
	// Wait for the first byte under the caller's deadline only.
	if _, err := c.r.Peek(1); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("forces: reading header: %w", err)
	}
	armed, err := c.armMessageDeadline()
	if err != nil {
		return nil, err
	}
	m, err := c.readRest(mb)
	if armed {
		if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			err = fmt.Errorf("%w: %w", ErrMessageTimeout, err)
		}
		c.dmu.Lock()
		derr := c.c.SetReadDeadline(c.readDL)
		c.dmu.Unlock()
		if err == nil && derr != nil {
			err = fmt.Errorf("forces: restoring read deadline: %w", derr)
		}
	}
	return m, err
}

// armMessageDeadline sets the read deadline to the message timeout from now,
// unless the whole message is already buffered or the caller's own deadline
// comes first. It reports whether it changed the deadline.
func (c *Conn) armMessageDeadline() (bool, error) {
	d := time.Duration(c.msgTimeout.Load())
	if d <= 0 {
		return false, nil
	}
	if n := c.r.Buffered(); n >= HeaderLen {
		h, _ := c.r.Peek(HeaderLen)
		if n >= int(binary.BigEndian.Uint16(h[2:]))*4 {
			return false, nil
		}
	}
	dl := time.Now().Add(d)
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if !c.readDL.IsZero() && c.readDL.Before(dl) {
		return false, nil
	}
	if err := c.c.SetReadDeadline(dl); err != nil {
		return false, fmt.Errorf("forces: setting message deadline: %w", err)
	}
	return true, nil
}

func (c *Conn) readRest(mb *MessageBuffer) (*Message, error) {
	if _, err := io.ReadFull(c.r, c.hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("forces: reading header: %w", err)
	}
	if v := c.hdr[0] >> 4; v != ProtocolVersion {
		return nil, fmt.Errorf("%w: version %d", ErrVersion, v)
	}
	n := int(binary.BigEndian.Uint16(c.hdr[2:])) * 4
	if n < HeaderLen {
		return nil, fmt.Errorf("%w: header Length %d words is less than the header", ErrLength, n/4)
	}
	if limit := int(c.maxMsg.Load()); n > limit {
		return nil, fmt.Errorf("%w: %v of %d bytes exceeds the %d-byte limit", ErrTooLarge, MessageType(c.hdr[1]), n, limit)
	}
	var buf []byte
	if mb != nil && cap(mb.bytes) >= n {
		buf = mb.bytes[:n]
	} else {
		buf = make([]byte, n)
		if mb != nil {
			mb.bytes = buf
		}
	}
	copy(buf, c.hdr[:])
	if _, err := io.ReadFull(c.r, buf[HeaderLen:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("forces: reading %d-byte %v body: %w", n, MessageType(c.hdr[1]), err)
	}
	if tap := c.tap.Load(); tap != nil {
		(*tap)(buf, false)
	}
	return parseInto(buf, mb)
}

// WriteMessage encodes m and writes it as one unit. m is not modified, so the
// same message may be written concurrently.
func (c *Conn) WriteMessage(m *Message) error {
	return c.WriteMessages(m)
}

// WriteMessages encodes ms back to back and writes them with one write, which
// no other writer can interleave with. Nothing is written if any fails to encode.
func (c *Conn) WriteMessages(ms ...*Message) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b := c.wbuf[:0]
	tap := c.tap.Load()
	offs := c.woff[:0]
	var err error
	for _, m := range ms {
		if b, err = appendMessage(b, m); err != nil {
			return err
		}
		if tap != nil {
			offs = append(offs, len(b))
		}
	}
	c.armWrite()
	_, err = c.c.Write(b)
	if err == nil && tap != nil {
		start := 0
		for _, end := range offs {
			(*tap)(b[start:end:end], true)
			start = end
		}
	}
	if cap(b) <= 1<<20 {
		c.wbuf = b
	}
	c.woff = offs
	if err != nil {
		return fmt.Errorf("forces: write: %w", err)
	}
	return nil
}

// WriteEncoded writes messages already encoded (by ConfigWriter, say) as one
// unit, as WriteMessages does. Each must be exactly one message whose header
// Length matches its size; otherwise nothing is written.
func (c *Conn) WriteEncoded(msgs ...[]byte) error {
	for _, m := range msgs {
		if err := checkHeader(m, len(m)); err != nil {
			return err
		}
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for _, m := range msgs {
		c.armWrite()
		if _, err := c.c.Write(m); err != nil {
			return fmt.Errorf("forces: write: %w", err)
		}
	}
	if tap := c.tap.Load(); tap != nil {
		for _, m := range msgs {
			(*tap)(m, true)
		}
	}
	return nil
}

// Close closes the underlying connection.
func (c *Conn) Close() error { return c.c.Close() }

// SetReadDeadline sets the deadline for ReadMessage. Set it here rather than
// on the wrapped connection: ReadMessage moves the connection's deadline
// while a message is arriving (see SetMessageTimeout) and restores this one.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	c.readDL = t
	return c.c.SetReadDeadline(t)
}

// SetWriteDeadline sets the deadline for WriteMessage and WriteMessages.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.c.SetWriteDeadline(t) }

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.c.SetWriteDeadline(t)
}

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.c.RemoteAddr() }

// LocalAddr returns the local address.
func (c *Conn) LocalAddr() net.Addr { return c.c.LocalAddr() }
