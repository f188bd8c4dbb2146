package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// gate admits a call or refuses it from its headers alone, before gRPC reads
// (let alone decodes) any of its messages: it is the server's tap
// (grpc.InTapHandle), so an unauthenticated client costs the CE no more than
// its HEADERS frame, whatever size of request it sends after.
type gate struct {
	want [sha256.Size]byte // of "Bearer TOKEN"; zero: no token required
	auth bool              // a token is required
}

func newGate(token string) *gate {
	g := &gate{}
	if token != "" {
		g.want, g.auth = sha256.Sum256([]byte("Bearer "+token)), true
	}
	return g
}

// Error texts of refused calls (all Unauthenticated).
const (
	errPlaintextToken = "authorization: a bearer token over plaintext TCP is refused (serve the API with api_tls; the token has been exposed: replace it)"
	errNoToken        = `authorization: want one "Bearer TOKEN"`
	errWrongToken     = "authorization: wrong token"
)

// tap runs on the connection's reader, for each new stream, with the peer
// in ctx.
func (g *gate) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	vals := info.Header.Get("authorization")
	if len(vals) > 0 && plaintextTCP(ctx) {
		return ctx, status.Error(codes.Unauthenticated, errPlaintextToken)
	}
	if !g.auth {
		return ctx, nil
	}
	if len(vals) != 1 {
		return ctx, status.Error(codes.Unauthenticated, errNoToken)
	}
	// Compared in constant time, hashed first, so not even the token's
	// length shows in the timing.
	got := sha256.Sum256([]byte(vals[0]))
	if subtle.ConstantTimeCompare(got[:], g.want[:]) != 1 {
		return ctx, status.Error(codes.Unauthenticated, errWrongToken)
	}
	return ctx, nil
}

// plaintextTCP reports whether the call in ctx came over TCP without TLS.
func plaintextTCP(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	if _, tcp := p.Addr.(*net.TCPAddr); !tcp {
		return false
	}
	_, tls := p.AuthInfo.(credentials.TLSInfo)
	return !tls
}
