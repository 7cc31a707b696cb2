package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"
)

// Keys of a bundled etcd's PKI Secret: the CA, the members' certificate (server and peer)
// and registrar's client certificate. The CA's key is not kept: nothing issues more
// certificates from it; a new PKI replaces all of them at once.
const (
	StoreCAKey         = "ca.crt"
	StoreMemberCertKey = "tls.crt"
	StoreMemberKeyKey  = "tls.key"
	StoreClientCertKey = "client.crt"
	StoreClientKeyKey  = "client.key"
)

const (
	// StoreValidity is the lifetime of a generated store PKI.
	StoreValidity = 5 * 365 * 24 * time.Hour
	// storeCACommonName marks a store CA generated here, so that only such a PKI is replaced.
	storeCACommonName = "registrar self-signed store CA"
	// StoreClientCommonName is the subject of registrar's client certificate.
	StoreClientCommonName = "registrar"
)

// StorePKI is a generated PKI for a bundled etcd, PEM-encoded: members present MemberCert
// to clients and to each other (it carries both server and client usage); registrar presents
// ClientCert. Both chain to CACert.
type StorePKI struct {
	CACert     []byte
	MemberCert []byte
	MemberKey  []byte
	ClientCert []byte
	ClientKey  []byte
}

// StorePKIFromData reads a PKI from a Secret's data (nil entries where keys are missing).
func StorePKIFromData(data map[string][]byte) *StorePKI {
	return &StorePKI{
		CACert: data[StoreCAKey], MemberCert: data[StoreMemberCertKey], MemberKey: data[StoreMemberKeyKey],
		ClientCert: data[StoreClientCertKey], ClientKey: data[StoreClientKeyKey],
	}
}

// Data is the PKI as a Secret's data.
func (p *StorePKI) Data() map[string][]byte {
	return map[string][]byte{
		StoreCAKey: p.CACert, StoreMemberCertKey: p.MemberCert, StoreMemberKeyKey: p.MemberKey,
		StoreClientCertKey: p.ClientCert, StoreClientKeyKey: p.ClientKey,
	}
}

// GenerateStorePKI creates a CA, a member certificate for hosts (DNS names, "*." wildcards
// and IP addresses) and a client certificate, all valid from now for StoreValidity.
func GenerateStorePKI(hosts []string, now time.Time) (*StorePKI, error) {
	if len(hosts) == 0 {
		return nil, errors.New("certs: the store's member certificate needs at least one host")
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: generate store CA key: %w", err)
	}
	caSerial, err := serial()
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          caSerial,
		Subject:               pkix.Name{CommonName: storeCACommonName, Organization: []string{organization}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(StoreValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("certs: create store CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("certs: parse store CA certificate: %w", err)
	}
	member := &x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0], Organization: []string{organization}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			member.IPAddresses = append(member.IPAddresses, ip)
		} else {
			member.DNSNames = append(member.DNSNames, h)
		}
	}
	memberCert, memberKey, err := issue(member, ca, caKey, now)
	if err != nil {
		return nil, fmt.Errorf("certs: store member certificate: %w", err)
	}
	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: StoreClientCommonName, Organization: []string{organization}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	clientCert, clientKey, err := issue(client, ca, caKey, now)
	if err != nil {
		return nil, fmt.Errorf("certs: store client certificate: %w", err)
	}
	return &StorePKI{
		CACert:     pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: caDER}),
		MemberCert: memberCert, MemberKey: memberKey,
		ClientCert: clientCert, ClientKey: clientKey,
	}, nil
}

// issue signs tmpl (valid from now for StoreValidity) with ca and returns the certificate
// and a new key, PEM-encoded.
func issue(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	if tmpl.SerialNumber, err = serial(); err != nil {
		return nil, nil, err
	}
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-clockSkew), now.Add(StoreValidity)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("create certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// CheckStorePKI says why p cannot serve a bundled etcd reached as hosts at now ("" when it
// can), and whether it may be replaced: true when p is empty or its CA was generated here.
// Usable means: every part present, each certificate a pair with its key, chained to the CA,
// not within RenewBefore of expiry, and the member certificate names exactly the hosts asked
// for (a change of the hosts, e.g. another namespace, gives a new PKI).
func CheckStorePKI(p *StorePKI, hosts []string, now time.Time) (problem string, ours bool) {
	if len(p.CACert) == 0 && len(p.MemberCert) == 0 && len(p.ClientCert) == 0 {
		return "empty", true
	}
	ca, err := parseCert(p.CACert)
	if err != nil {
		return fmt.Sprintf("%s: %v", StoreCAKey, err), false
	}
	ours = ca.Subject.CommonName == storeCACommonName
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, part := range []struct {
		name      string
		cert, key []byte
		usage     x509.ExtKeyUsage
	}{
		{StoreMemberCertKey, p.MemberCert, p.MemberKey, x509.ExtKeyUsageServerAuth},
		{StoreClientCertKey, p.ClientCert, p.ClientKey, x509.ExtKeyUsageClientAuth},
	} {
		leaf, err := parseCert(part.cert)
		if err != nil {
			return fmt.Sprintf("%s: %v", part.name, err), ours
		}
		if _, err := tls.X509KeyPair(part.cert, part.key); err != nil {
			return fmt.Sprintf("%s and its key are not a pair: %v", part.name, err), ours
		}
		if now.Add(RenewBefore).After(leaf.NotAfter) {
			return fmt.Sprintf("%s expires %s", part.name, leaf.NotAfter.UTC().Format(time.RFC3339)), ours
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{part.usage}}); err != nil {
			return fmt.Sprintf("%s does not verify against %s: %v", part.name, StoreCAKey, err), ours
		}
		if part.name == StoreMemberCertKey && !sameHosts(leaf, hosts) {
			return fmt.Sprintf("%s names other hosts than %v", part.name, hosts), ours
		}
	}
	return "", ours
}

// sameHosts: the certificate's DNS and IP SANs are exactly hosts (in any order).
func sameHosts(c *x509.Certificate, hosts []string) bool {
	have := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		have = append(have, ip.String())
	}
	want := make([]string, 0, len(hosts))
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			h = ip.String()
		}
		want = append(want, h)
	}
	slices.Sort(have)
	slices.Sort(want)
	return slices.Equal(slices.Compact(have), slices.Compact(want))
}
