package server

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	spv1 "github.com/splitplane/splitplane/api/splitplane/v1"
	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/forces"
)

// bearer sends a bearer token with every call.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return false }

// A bearer token (here on a unix socket): a call without it or with a wrong
// one is Unauthenticated, streams included, and counted as refused.
func TestAuthToken(t *testing.T) {
	c := startCE(t, ce.Config{})
	s := startServer(t, c, Config{Token: "s3cret"})
	ctx := ctxT(t)
	for name, cred := range map[string]bearer{"missing": "", "wrong": "s3cre", "longer": "s3crets"} {
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		if cred != "" {
			opts = append(opts, grpc.WithPerRPCCredentials(cred))
		}
		conn := dial(t, s, opts...)
		_, err := spv1.NewClassifierClient(conn).ListRules(ctx, &spv1.ListRulesRequest{})
		wantCode(t, name+" token", err, codes.Unauthenticated)
		stream, err := spv1.NewRoutesClient(conn).List(ctx, &spv1.ListRoutesRequest{})
		if err == nil {
			_, err = stream.Recv()
		}
		wantCode(t, name+" token, stream", err, codes.Unauthenticated)
	}
	// Two authorization values are refused too.
	conn := dial(t, s, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer("s3cret")))
	_, err := spv1.NewClassifierClient(conn).ListRules(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer s3cret"), &spv1.ListRulesRequest{})
	wantCode(t, "two tokens", err, codes.Unauthenticated)
	if _, err := spv1.NewRoutesClient(conn).Add(ctx, &spv1.AddRouteRequest{Route: route("198.51.100.0/24", "10.0.0.2")}); err != nil {
		t.Fatal(err)
	}
	if got := listAll(t, spv1.NewRoutesClient(conn), &spv1.ListRoutesRequest{}); len(got) != 1 {
		t.Fatalf("list with the token: %v", got)
	}
	refused := 0
	for _, m := range s.Stats().Snapshot() {
		refused += int(m.Codes["Unauthenticated"])
	}
	if refused != 7 {
		t.Fatalf("%d calls counted Unauthenticated, want 7: %+v", refused, s.Stats().Snapshot())
	}
}

// TCP needs mutual TLS: without it, a token or not, the server does not
// start (a bearer token over plaintext TCP is anyone's on the path).
func TestTCPNeedsTLS(t *testing.T) {
	c := startCE(t, ce.Config{})
	for _, cfg := range []Config{{Listen: "tcp:127.0.0.1:0"}, {Listen: "tcp:127.0.0.1:0", Token: "s3cret"}} {
		s, err := Start(c, cfg)
		if err == nil {
			s.Stop()
			t.Fatalf("%+v: started", cfg)
		}
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "TCP needs mutual TLS") {
			t.Fatalf("%+v: %v", cfg, err)
		}
	}
}

// A token arriving over a TCP connection without TLS is refused from the
// call's headers, whether or not the server wants a token; on a unix
// socket, or over TLS, it is checked.
func TestTokenOverPlaintextTCPRefused(t *testing.T) {
	tcp := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 40000}
	unix := &net.UnixAddr{Name: "@", Net: "unix"}
	info := &tap.Info{FullMethodName: "/splitplane.v1.Routes/Add", Header: metadata.Pairs("authorization", "Bearer s3cret")}
	for _, tc := range []struct {
		name  string
		token string
		p     *peer.Peer
		want  codes.Code
	}{
		{"plaintext TCP, token wanted", "s3cret", &peer.Peer{Addr: tcp}, codes.Unauthenticated},
		{"plaintext TCP, no token wanted", "", &peer.Peer{Addr: tcp}, codes.Unauthenticated},
		{"TLS", "s3cret", &peer.Peer{Addr: tcp, AuthInfo: credentials.TLSInfo{}}, codes.OK},
		{"unix socket", "s3cret", &peer.Peer{Addr: unix}, codes.OK},
	} {
		_, err := newGate(tc.token).tap(peer.NewContext(context.Background(), tc.p), info)
		if status.Code(err) != tc.want {
			t.Fatalf("%s: %v, want %s", tc.name, err, tc.want)
		}
		if tc.want != codes.OK && !strings.Contains(err.Error(), "bearer token over plaintext TCP is refused") {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
}

// TCP with mutual TLS and a token: both are needed.
func TestAuthTLSAndToken(t *testing.T) {
	pki, err := forces.WritePKI(t.TempDir(), time.Hour, "ce", "client")
	if err != nil {
		t.Fatal(err)
	}
	srvTLS := pki["ce"]
	c := startCE(t, ce.Config{})
	s := startServer(t, c, Config{Listen: "tcp:127.0.0.1:0", TLS: &srvTLS, Token: "s3cret"})
	good, err := pki["client"].ClientTLS("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	conn := dial(t, s, grpc.WithTransportCredentials(credentials.NewTLS(good)))
	_, err = spv1.NewClassifierClient(conn).ListRules(ctx, &spv1.ListRulesRequest{})
	wantCode(t, "TLS without the token", err, codes.Unauthenticated)
	conn = dial(t, s, grpc.WithTransportCredentials(credentials.NewTLS(good)), grpc.WithPerRPCCredentials(bearer("s3cret")))
	if _, err := spv1.NewClassifierClient(conn).ListRules(ctx, &spv1.ListRulesRequest{}); err != nil {
		t.Fatalf("TLS and the token: %v", err)
	}
}

// TCP with mutual TLS: a client without a certificate, or with one from
// another CA, is refused; one with a certificate from the CA gets in.
func TestAuthMutualTLS(t *testing.T) {
	dir := t.TempDir()
	pki, err := forces.WritePKI(dir, time.Hour, "ce", "client")
	if err != nil {
		t.Fatal(err)
	}
	other, err := forces.WritePKI(t.TempDir(), time.Hour, "client")
	if err != nil {
		t.Fatal(err)
	}
	srvTLS := pki["ce"]
	c := startCE(t, ce.Config{})
	s := startServer(t, c, Config{Listen: "tcp:127.0.0.1:0", TLS: &srvTLS})
	ctx := ctxT(t)
	call := func(tc *tls.Config) error {
		conn := dial(t, s, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
		_, err := spv1.NewClassifierClient(conn).ListRules(ctx, &spv1.ListRulesRequest{})
		return err
	}
	good, err := pki["client"].ClientTLS("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if err := call(good); err != nil {
		t.Fatalf("client with a certificate: %v", err)
	}
	noCert := good.Clone()
	noCert.Certificates = nil
	if err := call(noCert); err == nil {
		t.Fatal("client without a certificate got in")
	}
	stranger, err := other["client"].ClientTLS("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	stranger.RootCAs = good.RootCAs // it trusts the server, the server does not trust it
	if err := call(stranger); err == nil {
		t.Fatal("client with a certificate from another CA got in")
	}
	// Plain text to a TLS server fails.
	conn := dial(t, s)
	if _, err := spv1.NewClassifierClient(conn).ListRules(ctx, &spv1.ListRulesRequest{}); err == nil {
		t.Fatal("plain-text client got in")
	}
}

// Server reflection lists the services, so grpcurl works.
func TestReflection(t *testing.T) {
	_, s, _ := setup(t)
	stream, err := rpb.NewServerReflectionClient(dial(t, s)).ServerReflectionInfo(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sv := range resp.GetListServicesResponse().GetService() {
		got = append(got, sv.GetName())
	}
	for _, want := range []string{"splitplane.v1.Routes", "splitplane.v1.FEs", "splitplane.v1.BGP", "splitplane.v1.Classifier", "grpc.reflection.v1.ServerReflection"} {
		if !slices.Contains(got, want) {
			t.Errorf("reflection lists %v, not %s", got, want)
		}
	}
}
