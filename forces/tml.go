package forces

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
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

	wmu  sync.Mutex
	wbuf []byte
}

// NewConn wraps c.
func NewConn(c net.Conn) *Conn {
	return &Conn{c: c, r: bufio.NewReaderSize(c, 64<<10)}
}

// ReadMessage reads exactly one message. It validates the header (version,
// Length between 6 and 0xFFFF words) before reading the body, so a peer can
// make it allocate at most MaxMessageLen bytes. It returns io.EOF when the
// stream ends cleanly between messages and an error wrapping
// io.ErrUnexpectedEOF when it ends inside one.
func (c *Conn) ReadMessage() (*Message, error) {
	if _, err := io.ReadFull(c.r, c.hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
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
	buf := make([]byte, n)
	copy(buf, c.hdr[:])
	if _, err := io.ReadFull(c.r, buf[HeaderLen:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("forces: reading %d-byte %v body: %w", n, MessageType(c.hdr[1]), err)
	}
	return parseOwned(buf)
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
	var err error
	for _, m := range ms {
		if b, err = appendMessage(b, m); err != nil {
			return err
		}
	}
	_, err = c.c.Write(b)
	if cap(b) <= 1<<20 {
		c.wbuf = b
	}
	if err != nil {
		return fmt.Errorf("forces: write: %w", err)
	}
	return nil
}

// Close closes the underlying connection.
func (c *Conn) Close() error { return c.c.Close() }

// SetReadDeadline sets the deadline for ReadMessage.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.c.SetReadDeadline(t) }

// SetWriteDeadline sets the deadline for WriteMessage and WriteMessages.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.c.SetWriteDeadline(t) }

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error { return c.c.SetDeadline(t) }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.c.RemoteAddr() }

// LocalAddr returns the local address.
func (c *Conn) LocalAddr() net.Addr { return c.c.LocalAddr() }
