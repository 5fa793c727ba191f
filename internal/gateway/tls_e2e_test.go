package gateway_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA issues certificates made in the test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var certSerial = big.NewInt(100)

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate and key (PEM) for cn; server certificates
// name 127.0.0.1.
func (ca *testCA) issue(t *testing.T, cn string, server bool) (certPEM, keyPEM []byte, pair tls.Certificate) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	certSerial.Add(certSerial, big.NewInt(1))
	tmpl := &x509.Certificate{SerialNumber: new(big.Int).Set(certSerial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	if server {
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	pair, err = tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM, pair
}

// writeAtomic replaces a file by renaming, as config managers do.
func writeAtomic(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestTLSClientCertsAndReload(t *testing.T) {
	dir := t.TempDir()
	ca, clientCA, stranger := newTestCA(t, "server CA"), newTestCA(t, "client CA"), newTestCA(t, "stranger CA")
	certPEM, keyPEM, _ := ca.issue(t, "gateway-1", true)
	certFile, keyFile, caFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "clients.pem")
	for f, b := range map[string][]byte{certFile: certPEM, keyFile: keyPEM, caFile: clientCA.pem} {
		writeAtomic(t, f, b)
	}
	top := `timeout: 20s
tls: {cert: ` + certFile + `, key: ` + keyFile + `, client_ca: ` + caFile + `}
clients:
  alice:
    cert_names: [alice.example.com]
    destinations: [alpha]
  ops:
    tokens: ["sha256:` + sha256Hex(fastToken) + `"]
    destinations: [alpha]
`
	h := startAgg(t, top, "", aggDest("alpha", "a1"))
	h.base = strings.Replace(h.base, "http://", "https://", 1)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	_, _, alice := clientCA.issue(t, "alice.example.com", false)
	_, _, bob := clientCA.issue(t, "bob.example.com", false)
	_, _, forged := stranger.issue(t, "alice.example.com", false)
	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Timeout: waitFor, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}}
	}
	post := func(c *http.Client, hdr ...string) (*http.Response, error) {
		req, _ := http.NewRequest("POST", h.url("/alpha/mcp"), strings.NewReader(string(rpc(0, "initialize", initParams("")))))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}
	expect := func(what string, c *http.Client, want int, hdr ...string) *http.Response {
		t.Helper()
		resp, err := post(c, hdr...)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", what, resp.StatusCode, want)
		}
		return resp
	}
	resp := expect("alice's certificate", client(alice), http.StatusOK)
	if resp.TLS == nil || resp.TLS.PeerCertificates[0].Subject.CommonName != "gateway-1" {
		t.Fatalf("served certificate: %+v", resp.TLS)
	}
	expect("no certificate, no token", client(), http.StatusUnauthorized)
	expect("no certificate, a token", client(), http.StatusOK, bearer(fastToken)...)
	expect("a certificate of no client", client(bob), http.StatusUnauthorized)
	// A client that sends its certificate whatever CAs the server asks
	// for: a certificate of another CA fails the handshake.
	sendAnyway := &http.Client{Timeout: waitFor, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &forged, nil }}}}
	if _, err := post(sendAnyway); err == nil {
		t.Errorf("a certificate of an unknown CA was accepted")
	}
	if _, err := post(&http.Client{Transport: &http.Transport{}}); err == nil {
		t.Errorf("the server's certificate was trusted without its CA")
	}

	// New files: the next handshake presents the new certificate.
	certPEM, keyPEM, _ = ca.issue(t, "gateway-2", true)
	writeAtomic(t, keyFile, keyPEM)
	writeAtomic(t, certFile, certPEM)
	// The two writes land in one reload, or in a failed one (the new key
	// with the old certificate) and then one that loads: either way the
	// first successful reload has both files.
	h.logs.waitCount(t, slog.LevelInfo, "tls certificate reloaded", 1)
	c := client(alice)
	if resp := expect("alice after the reload", c, http.StatusOK); resp.TLS.PeerCertificates[0].Subject.CommonName != "gateway-2" {
		t.Errorf("served %s after the reload, want gateway-2", resp.TLS.PeerCertificates[0].Subject.CommonName)
	}
	// Files that do not load keep the old certificate serving.
	const broken = "tls files changed but do not load; the previous certificate keeps serving"
	n := h.logs.count(slog.LevelWarn, broken)
	writeAtomic(t, certFile, []byte("not a certificate"))
	h.logs.waitCount(t, slog.LevelWarn, broken, n+1)
	c.CloseIdleConnections()
	if resp := expect("after a broken write", c, http.StatusOK); resp.TLS.PeerCertificates[0].Subject.CommonName != "gateway-2" {
		t.Errorf("served %s after a broken write", resp.TLS.PeerCertificates[0].Subject.CommonName)
	}
}
