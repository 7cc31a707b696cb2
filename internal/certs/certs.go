// Package certs generates a self-signed CA and a serving certificate signed by it, for
// running the webhook server outside a cluster (or anywhere without cert-manager).
//
// The files use the names controller-runtime's webhook server and cert-manager's Secrets use:
// tls.crt (serving certificate), tls.key (its private key) and ca.crt (the CA, which goes into
// the webhook configuration's caBundle).
package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File names inside the certificate directory.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
	CAFile   = "ca.crt"
)

const (
	// Validity is the lifetime of a generated CA and serving certificate.
	Validity = 365 * 24 * time.Hour
	// RenewBefore: existing files are regenerated when they expire within this margin.
	RenewBefore = 30 * 24 * time.Hour
	// caCommonName marks a CA (and the certificates it issued) as generated here, so that
	// Ensure only ever replaces its own files.
	caCommonName = "registrar self-signed webhook CA"
	// organization is the subject organization of every certificate generated here.
	organization = "registrar"
	// clockSkew back-dates NotBefore so a slightly slow clock elsewhere accepts new certs.
	clockSkew = time.Hour
)

// Bundle is a generated CA and serving certificate, PEM-encoded.
type Bundle struct {
	CACert []byte // ca.crt
	Cert   []byte // tls.crt
	Key    []byte // tls.key (PKCS#8)
}

// ParseHosts splits a comma-separated list of DNS names and IP addresses, dropping blanks.
// pemCertificate is the PEM block type of a certificate.
const pemCertificate = "CERTIFICATE"

func ParseHosts(s string) []string {
	var out []string
	for _, h := range strings.Split(s, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// Generate creates a new ECDSA P-256 CA and a serving certificate for hosts (DNS names and IP
// addresses), both valid from now for Validity.
func Generate(hosts []string, now time.Time) (*Bundle, error) {
	if len(hosts) == 0 {
		return nil, errors.New("certs: at least one host (DNS name or IP) is needed")
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: generate CA key: %w", err)
	}
	caSerial, err := serial()
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          caSerial,
		Subject:               pkix.Name{CommonName: caCommonName, Organization: []string{organization}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("certs: create CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("certs: parse CA certificate: %w", err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: generate serving key: %w", err)
	}
	leafSerial, err := serial()
	if err != nil {
		return nil, err
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: leafSerial,
		Subject:      pkix.Name{CommonName: hosts[0], Organization: []string{organization}},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     now.Add(Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			leafTmpl.IPAddresses = append(leafTmpl.IPAddresses, ip)
		} else {
			leafTmpl.DNSNames = append(leafTmpl.DNSNames, h)
		}
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("certs: create serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("certs: encode serving key: %w", err)
	}
	return &Bundle{
		CACert: pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: caDER}),
		Cert:   pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: leafDER}),
		Key:    pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// Ensure makes dir hold a serving certificate for hosts. Existing files are reused when
// tls.crt and tls.key are a pair, cover every host, are not within RenewBefore of expiry and,
// when ca.crt is present, verify against it. Otherwise a new CA and certificate are written,
// but only over files this package generated (or none): a certificate from elsewhere is never
// replaced, and an error says so. It reports whether it wrote new files.
func Ensure(dir string, hosts []string) (generated bool, err error) {
	return ensureAt(dir, hosts, time.Now())
}

func ensureAt(dir string, hosts []string, now time.Time) (bool, error) {
	if len(hosts) == 0 {
		return false, errors.New("certs: at least one host (DNS name or IP) is needed")
	}
	problem, ours, err := check(dir, hosts, now)
	if err != nil {
		return false, err
	}
	if problem == "" {
		return false, nil
	}
	if !ours {
		return false, fmt.Errorf("certs: %s holds a certificate registrar did not generate, and it is not usable (%s); remove it or do not ask for a self-signed one", dir, problem)
	}
	b, err := Generate(hosts, now)
	if err != nil {
		return false, err
	}
	if err := WriteDir(dir, b); err != nil {
		return false, err
	}
	return true, nil
}

// WriteDir writes b into dir as tls.key, tls.crt and ca.crt, each file replaced atomically.
func WriteDir(dir string, b *Bundle) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	// Key first, then certificate, then CA: a watcher reloading between writes sees a
	// mismatched pair, fails to load it and retries on the next write.
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{{KeyFile, b.Key, 0o600}, {CertFile, b.Cert, 0o644}, {CAFile, b.CACert, 0o644}} {
		if err := writeAtomic(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// ReadDir reads the bundle in dir (tls.crt, tls.key, ca.crt).
func ReadDir(dir string) (*Bundle, error) {
	var b Bundle
	for _, f := range []struct {
		name string
		into *[]byte
	}{{KeyFile, &b.Key}, {CertFile, &b.Cert}, {CAFile, &b.CACert}} {
		data, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			return nil, fmt.Errorf("certs: %w", err)
		}
		*f.into = data
	}
	return &b, nil
}

// BundleFromData reads a bundle from a Secret's data (nil where a key is missing).
func BundleFromData(data map[string][]byte) *Bundle {
	return &Bundle{CACert: data[CAFile], Cert: data[CertFile], Key: data[KeyFile]}
}

// Data is the bundle as a Secret's data.
func (b *Bundle) Data() map[string][]byte {
	return map[string][]byte{CAFile: b.CACert, CertFile: b.Cert, KeyFile: b.Key}
}

// Empty reports whether the bundle holds nothing (a Secret the install created empty).
func (b *Bundle) Empty() bool {
	return len(b.CACert) == 0 && len(b.Cert) == 0 && len(b.Key) == 0
}

// check returns why the files in dir cannot be used for hosts ("" when they can), and
// whether they may be replaced: true when there are none or registrar generated them.
func check(dir string, hosts []string, now time.Time) (problem string, ours bool, err error) {
	certPEM, certErr := os.ReadFile(filepath.Join(dir, CertFile))
	keyPEM, keyErr := os.ReadFile(filepath.Join(dir, KeyFile))
	caPEM, caErr := os.ReadFile(filepath.Join(dir, CAFile))
	for _, e := range []error{certErr, keyErr, caErr} {
		if e != nil && !errors.Is(e, fs.ErrNotExist) {
			return "", false, fmt.Errorf("certs: %w", e)
		}
	}
	if certErr != nil {
		// No serving certificate: a lone key or CA is only ours to replace if the CA is.
		if caErr == nil {
			if ca, err := parseCert(caPEM); err != nil || ca.Subject.CommonName != caCommonName {
				return "tls.crt is missing", false, nil
			}
		}
		return "tls.crt is missing", true, nil
	}
	leaf, err := parseCert(certPEM)
	if err != nil {
		return fmt.Sprintf("tls.crt: %v", err), false, nil
	}
	ours = leaf.Issuer.CommonName == caCommonName
	switch {
	case keyErr != nil:
		return "tls.key is missing", ours, nil
	case now.Add(RenewBefore).After(leaf.NotAfter):
		return fmt.Sprintf("tls.crt expires %s", leaf.NotAfter.UTC().Format(time.RFC3339)), ours, nil
	case now.Before(leaf.NotBefore):
		return fmt.Sprintf("tls.crt is not valid before %s", leaf.NotBefore.UTC().Format(time.RFC3339)), ours, nil
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return fmt.Sprintf("tls.crt and tls.key are not a pair: %v", err), ours, nil
	}
	for _, h := range hosts {
		if err := leaf.VerifyHostname(h); err != nil {
			return fmt.Sprintf("tls.crt does not cover %s", h), ours, nil
		}
	}
	if caErr == nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return "ca.crt holds no certificate", ours, nil
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			return fmt.Sprintf("tls.crt does not verify against ca.crt: %v", err), ours, nil
		}
	} else if ours {
		return "ca.crt is missing", true, nil
	}
	return "", ours, nil
}

func parseCert(p []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(bytes.TrimSpace(p))
	if block == nil || block.Type != pemCertificate {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certs: serial number: %w", err)
	}
	return n, nil
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("certs: write %s: %w", path, err)
	}
	if err := f.Chmod(mode); err != nil {
		_ = f.Close()
		return fmt.Errorf("certs: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("certs: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	return nil
}
