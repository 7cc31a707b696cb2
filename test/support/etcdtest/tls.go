package etcdtest

import (
	"context"
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

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/registrar-dev/registrar/test/support/ports"
	"github.com/registrar-dev/registrar/test/support/proc"
)

// PKI is a self-made CA with certificates for a TLS etcd on 127.0.0.1, as PEM files in Dir:
// ca.crt, server.crt/key, client.crt/key (signed by the CA), and other-ca.crt with
// other-client.crt/key (a second, untrusted CA and a client certificate it signed).
type PKI struct{ Dir string }

// File is the path of one of the PKI's files, e.g. "client.crt".
func (p PKI) File(name string) string { return filepath.Join(p.Dir, name) }

// NewPKI writes the files of a PKI into dir.
func NewPKI(dir string) (PKI, error) {
	p := PKI{Dir: dir}
	ca, caKey, err := newCA("registrar test CA")
	if err != nil {
		return p, err
	}
	other, otherKey, err := newCA("untrusted test CA")
	if err != nil {
		return p, err
	}
	steps := []struct {
		name   string
		issuer *x509.Certificate
		key    *ecdsa.PrivateKey
		usage  x509.ExtKeyUsage
	}{
		{"server", ca, caKey, x509.ExtKeyUsageServerAuth},
		{"client", ca, caKey, x509.ExtKeyUsageClientAuth},
		{"other-client", other, otherKey, x509.ExtKeyUsageClientAuth},
	}
	if err := writePEM(p.File("ca.crt"), "CERTIFICATE", ca.Raw); err != nil {
		return p, err
	}
	if err := writePEM(p.File("other-ca.crt"), "CERTIFICATE", other.Raw); err != nil {
		return p, err
	}
	for _, s := range steps {
		if err := issue(p, s.name, s.issuer, s.key, s.usage); err != nil {
			return p, err
		}
	}
	return p, nil
}

func newCA(cn string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func issue(p PKI, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, usage x509.ExtKeyUsage) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("%s key: %w", name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("%s certificate: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("%s key: %w", name, err)
	}
	if err := writePEM(p.File(name+".crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(p.File(name+".key"), "PRIVATE KEY", keyDER)
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// TLSServer is an etcd process on 127.0.0.1 serving clients over TLS and requiring a client
// certificate signed by its PKI's CA (--client-cert-auth).
type TLSServer struct {
	PKI      PKI
	endpoint string
	proc     *proc.Process
}

// Endpoint is the server's https client URL.
func (s *TLSServer) Endpoint() string { return s.endpoint }

// StartTLS makes a PKI under dir and starts an etcd that requires client certificates.
func StartTLS(dir string) (*TLSServer, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	pki, err := NewPKI(dir)
	if err != nil {
		return nil, err
	}
	ports, err := ports.FreePorts(2)
	if err != nil {
		return nil, err
	}
	s := &TLSServer{PKI: pki, endpoint: fmt.Sprintf("https://127.0.0.1:%d", ports[0])}
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	s.proc, err = proc.Start(proc.Config{Name: "etcd (TLS)", Bin: bin, Env: Env(), LogPath: filepath.Join(dir, "etcd.log"),
		Args: []string{"--name", "tls", "--data-dir", filepath.Join(dir, "etcd-data"),
			"--listen-client-urls", s.endpoint, "--advertise-client-urls", s.endpoint,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "tls=" + peer,
			"--cert-file", pki.File("server.crt"), "--key-file", pki.File("server.key"),
			"--trusted-ca-file", pki.File("ca.crt"), "--client-cert-auth", "--log-level", "error"}})
	if err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	if err := s.waitReady(30 * time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// waitReady polls the server with the PKI's trusted client certificate until it answers.
func (s *TLSServer) waitReady(timeout time.Duration) error {
	info := transport.TLSInfo{TrustedCAFile: s.PKI.File("ca.crt"), CertFile: s.PKI.File("client.crt"), KeyFile: s.PKI.File("client.key")}
	cfg, err := info.ClientConfig()
	if err != nil {
		return fmt.Errorf("client TLS config: %w", err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.endpoint}, DialTimeout: 2 * time.Second, TLS: cfg, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	return pollReady(cli, s.proc, timeout)
}

// pollReady reads through cli until etcd (the process p) answers.
func pollReady(cli *clientv3.Client, p *proc.Process, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "health")
		cancel()
		if err == nil {
			return nil
		}
		if err := p.Exited(); err != nil {
			return fmt.Errorf("etcd exited before serving: %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd not serving after %s: %w", timeout, err)
		}
		time.Sleep(50 * time.Millisecond) // polling a starting process, not synchronising a test
	}
}

// Stop kills the process.
func (s *TLSServer) Stop() { s.proc.Kill() }
