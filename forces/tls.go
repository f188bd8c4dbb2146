package forces

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ErrTLSConfig reports TLS material that cannot be loaded or used.
var ErrTLSConfig = errors.New("forces: bad TLS configuration")

// TLSConfig names the PEM files that secure a TML connection with mutual
// authentication (RFC 5810 §5 asks the TML for authentication and
// confidentiality): this end's certificate chain and key, and the CA bundle
// that the peer's certificate must chain to.
type TLSConfig struct {
	// Cert is the PEM file of this end's certificate chain.
	Cert string `yaml:"cert"`
	// Key is the PEM file of the certificate's private key.
	Key string `yaml:"key"`
	// CA is the PEM bundle of the CAs the other end's certificate must
	// chain to.
	CA string `yaml:"ca"`
}

// ServerTLS returns the listener-side configuration: TLS 1.3 or later, this
// end's certificate, and client certificates required and verified against CA.
func (c TLSConfig) ServerTLS() (*tls.Config, error) {
	cert, pool, err := c.load()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}, nil
}

// ClientTLS returns the dialer-side configuration: TLS 1.3 or later, this
// end's certificate for the server to verify, and the server's certificate
// verified against CA for serverName (a DNS name or IP literal).
func (c TLSConfig) ClientTLS(serverName string) (*tls.Config, error) {
	if serverName == "" {
		return nil, fmt.Errorf("%w: empty server name", ErrTLSConfig)
	}
	cert, pool, err := c.load()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ServerName:   serverName,
	}, nil
}

func (c TLSConfig) load() (tls.Certificate, *x509.CertPool, error) {
	if c.Cert == "" || c.Key == "" || c.CA == "" {
		return tls.Certificate{}, nil, fmt.Errorf("%w: Cert, Key and CA are all required", ErrTLSConfig)
	}
	cert, err := tls.LoadX509KeyPair(c.Cert, c.Key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("%w: %w", ErrTLSConfig, err)
	}
	pem, err := os.ReadFile(c.CA)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("%w: %w", ErrTLSConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return tls.Certificate{}, nil, fmt.Errorf("%w: no certificate in CA file %s", ErrTLSConfig, c.CA)
	}
	return cert, pool, nil
}

// FECertName is the DNS name that binds a certificate to FE n: "fe-N", the
// FE's number in decimal. A certificate is bound to FE n when one of its
// DNS subject alternative names is that name or starts with it followed by
// a dot (fe-1, fe-1.fe.example.net); the CE admits an FE over TLS only with
// a certificate bound to the FE ID it asks to associate as.
func FECertName(n uint32) string { return "fe-" + strconv.FormatUint(uint64(n), 10) }

// CertBindsFE reports whether cert is bound to FE fe (see FECertName).
func CertBindsFE(cert *x509.Certificate, fe ID) bool {
	if cert == nil || !fe.IsFE() {
		return false
	}
	want := FECertName(uint32(fe) & subIDMask)
	for _, n := range cert.DNSNames {
		if n == want || (strings.HasPrefix(n, want) && n[len(want)] == '.') {
			return true
		}
	}
	return false
}
