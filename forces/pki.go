package forces

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// WritePKI makes a private CA and, for each name, a certificate and key signed
// by it, valid for the name and for 127.0.0.1, for both TLS client and server
// use, and for the given lifetime. It writes DIR/ca.crt, DIR/NAME.crt and
// DIR/NAME.key (mode 0600) and returns each name's TLSConfig. It is meant for
// labs and tests; a deployment brings certificates from its own CA.
func WritePKI(dir string, lifetime time.Duration, names ...string) (map[string]TLSConfig, error) {
	certs := make([]PKICert, len(names))
	for i, n := range names {
		certs[i] = PKICert{Name: n}
	}
	return WritePKICerts(dir, lifetime, certs...)
}

// PKICert is a certificate WritePKICerts makes: its file name and Common
// Name, and DNS names besides Name (an FE's FECertName, say).
type PKICert struct {
	Name string
	DNS  []string
}

// WritePKICerts is WritePKI with more DNS names in some certificates.
func WritePKICerts(dir string, lifetime time.Duration, certs ...PKICert) (map[string]TLSConfig, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "splitplane lab CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(lifetime),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	caPath := filepath.Join(dir, "ca.crt")
	if err := writePEM(caPath, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	out := make(map[string]TLSConfig, len(certs))
	for i, pc := range certs {
		name := pc.Name
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i) + 2), Subject: pkix.Name{CommonName: name},
			DNSNames: append([]string{name}, pc.DNS...), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(lifetime),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return nil, err
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, err
		}
		c := TLSConfig{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key"), CA: caPath}
		if err := writePEM(c.Cert, "CERTIFICATE", der); err != nil {
			return nil, err
		}
		if err := writePEM(c.Key, "EC PRIVATE KEY", kder); err != nil {
			return nil, err
		}
		out[name] = c
	}
	return out, nil
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
