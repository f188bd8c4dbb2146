package forces

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue writes a leaf certificate, its key and the CA bundle into dir and
// returns the TLSConfig naming them.
func (ca *testCA) issue(t *testing.T, dir, name string, usage x509.ExtKeyUsage) TLSConfig {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := TLSConfig{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key"), CA: filepath.Join(dir, name+"-ca.crt")}
	for path, data := range map[string][]byte{
		c.Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		c.Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		c.CA:   ca.pem,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func TestTLSMutualAuth(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "splitplane test CA")
	feCfg := ca.issue(t, dir, "fe.test", x509.ExtKeyUsageServerAuth)
	ceCfg := ca.issue(t, dir, "ce.test", x509.ExtKeyUsageClientAuth)
	rogue := newTestCA(t, "rogue CA")
	badCfg := rogue.issue(t, dir, "mallory.test", x509.ExtKeyUsageClientAuth)
	badCfg.CA = ceCfg.CA // trusts the real CA, but its own cert is from the rogue one

	srvTLS, err := feCfg.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	if srvTLS.MinVersion != tls.VersionTLS13 || srvTLS.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Fatalf("server config %+v", srvTLS)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		msg *Message
		err error
	}
	results := make(chan result, 3)
	go func() {
		for i := 0; i < 3; i++ {
			c, err := ln.Accept()
			if err != nil {
				results <- result{nil, err}
				return
			}
			c.SetDeadline(time.Now().Add(10 * time.Second))
			m, err := NewConn(c).ReadMessage()
			c.Close()
			results <- result{m, err}
		}
	}()

	// The genuine CE: handshake, then a message goes through.
	cliTLS, err := ceCfg.ClientTLS("fe.test")
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.Dial("tcp", ln.Addr().String(), cliTLS)
	if err != nil {
		t.Fatalf("genuine client: %v", err)
	}
	if st := c.ConnectionState(); st.Version != tls.VersionTLS13 {
		t.Errorf("negotiated %x", st.Version)
	}
	if err := NewConn(c).WriteMessage(NewAssociationSetup(testFE, testCE, 1)); err != nil {
		t.Fatal(err)
	}
	if r := <-results; r.err != nil || r.msg.Header.Type != MsgAssociationSetup {
		t.Fatalf("server read %+v", r)
	}
	c.Close()

	// A client whose certificate the CA did not sign is refused: the server's
	// handshake fails, and so does the client's first read.
	badTLS, err := badCfg.ClientTLS("fe.test")
	if err != nil {
		t.Fatal(err)
	}
	bc, err := tls.DialWithDialer(&net.Dialer{Deadline: time.Now().Add(10 * time.Second)}, "tcp", ln.Addr().String(), badTLS)
	if err == nil {
		bc.SetDeadline(time.Now().Add(10 * time.Second))
		NewConn(bc).WriteMessage(NewAssociationSetup(testFE, testCE, 1))
		_, err = bc.Read(make([]byte, 1))
		bc.Close()
	}
	if err == nil {
		t.Error("rogue client was not refused")
	}
	if r := <-results; r.err == nil {
		t.Errorf("server accepted a message from a rogue client: %+v", r.msg)
	}

	// A client that does not trust the server's CA refuses it.
	distrust := ceCfg
	os.WriteFile(filepath.Join(dir, "rogue-ca.crt"), rogue.pem, 0o600)
	distrust.CA = filepath.Join(dir, "rogue-ca.crt")
	dTLS, _ := distrust.ClientTLS("fe.test")
	dialer := &net.Dialer{Timeout: 10 * time.Second, Deadline: time.Now().Add(10 * time.Second)}
	if c, err := tls.DialWithDialer(dialer, "tcp", ln.Addr().String(), dTLS); err == nil {
		c.Close()
		t.Error("client accepted a server from an untrusted CA")
	}
}

func TestTLSConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []TLSConfig{
		{},
		{Cert: "/nonexistent", Key: "/nonexistent", CA: "/nonexistent"},
	} {
		if _, err := c.ServerTLS(); !errors.Is(err, ErrTLSConfig) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	good := newTestCA(t, "ca").issue(t, dir, "x.test", x509.ExtKeyUsageServerAuth)
	if _, err := good.ClientTLS(""); !errors.Is(err, ErrTLSConfig) {
		t.Errorf("empty server name: %v", err)
	}
	os.WriteFile(good.CA, []byte("not PEM"), 0o600)
	if _, err := good.ServerTLS(); !errors.Is(err, ErrTLSConfig) {
		t.Errorf("CA without certificates: %v", err)
	}
}
