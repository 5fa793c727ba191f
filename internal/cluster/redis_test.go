package cluster

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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/cluster/clustertest"
)

// TestNewRedisPassword: the password comes from the environment or a
// file and is used; a wrong one fails, and no error shows it.
func TestNewRedisPassword(t *testing.T) {
	r := clustertest.StartRedis(t, "--requirepass", "p4ss-w0rd")
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "password")
	os.WriteFile(file, []byte("p4ss-w0rd\n"), 0o600)
	t.Setenv("SB_TEST_REDIS_PASSWORD", "p4ss-w0rd")
	for name, o := range map[string]RedisOptions{
		"env":  {URL: "redis://" + r.Addr + "/0", PasswordEnv: "SB_TEST_REDIS_PASSWORD"},
		"file": {URL: "redis://" + r.Addr, PasswordFile: file},
		"url":  {URL: "redis://:p4ss-w0rd@" + r.Addr},
	} {
		c, err := NewRedis(o)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := c.Ping(ctx).Err(); err != nil {
			t.Errorf("%s: PING: %v", name, err)
		}
		c.Close()
	}
	c, err := NewRedis(RedisOptions{URL: "redis://:wrong-one@" + r.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(ctx).Err(); err == nil || strings.Contains(err.Error(), "wrong-one") {
		t.Errorf("wrong password: %v", err)
	}
}

func TestNewRedisRejects(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, nil, 0o600)
	for _, o := range []RedisOptions{
		{},
		{URL: "http://host:6379"},
		{URL: "redis://:s3cret@host:notaport"},
		{URL: "redis://host", PasswordEnv: "A", PasswordFile: "B"},
		{URL: "redis://host", PasswordEnv: "SB_TEST_SURELY_UNSET"},
		{URL: "redis://host", PasswordFile: "/nonexistent/password"},
		{URL: "redis://host", PasswordFile: empty},
		{URL: "redis://host", TLS: TLSFiles{ServerName: "x"}},
		{URL: "rediss://host", TLS: TLSFiles{CertFile: "c"}},
		{URL: "rediss://host", TLS: TLSFiles{CAFile: empty}},
	} {
		c, err := NewRedis(o)
		if err == nil {
			c.Close()
			t.Errorf("%+v accepted", o)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

// TestNewRedisTLS: rediss:// with a CA file reaches a TLS-only Redis whose
// certificate that CA signed; without it the system roots refuse it.
func TestNewRedisTLS(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile := writeCA(t, dir)
	tlsPort := clustertest.FreePort(t)
	r := clustertest.StartRedis(t, "--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", certFile,
		"--tls-key-file", keyFile, "--tls-ca-cert-file", caFile, "--tls-auth-clients", "no")
	_ = r
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	url := fmt.Sprintf("rediss://127.0.0.1:%d", tlsPort)
	c, err := NewRedis(RedisOptions{URL: url, TLS: TLSFiles{CAFile: caFile, ServerName: "redis.test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Errorf("PING over TLS: %v", err)
	}
	bad, err := NewRedis(RedisOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if err := bad.Ping(ctx).Err(); err == nil {
		t.Error("an unknown CA's certificate was accepted")
	}
}

// writeCA writes a CA and a server certificate for redis.test and
// 127.0.0.1 signed by it.
func writeCA(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ = x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "redis.test"}, DNSNames: []string{"redis.test"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return write("ca.pem", "CERTIFICATE", caDER), write("redis.pem", "CERTIFICATE", leafDER), write("redis.key", "EC PRIVATE KEY", keyDER)
}
