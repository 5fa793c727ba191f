package cluster

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RedisOptions say how to reach the cluster's Redis (the proposed
// cluster.redis config block, docs/cluster.md). Only URL is required.
type RedisOptions struct {
	// URL is redis://[user[:password]@]host:port[/db] or rediss:// for
	// TLS (go-redis' ParseURL forms and query options).
	URL string
	// PasswordEnv names an environment variable holding the password;
	// "" means none. It overrides a password in URL.
	PasswordEnv string
	// PasswordFile is a file whose first line is the password (a
	// Kubernetes Secret); "" means none. At most one of PasswordEnv and
	// PasswordFile.
	PasswordFile string
	// TLS adjusts rediss://; its zero value trusts the system roots and
	// presents no client certificate.
	TLS TLSFiles
}

// TLSFiles are PEM files for a TLS connection to Redis; "" means the
// default (system roots, no client certificate, the URL's host name).
type TLSFiles struct {
	CAFile     string
	CertFile   string // with KeyFile: a client certificate
	KeyFile    string
	ServerName string
}

// NewRedis returns a client of o's Redis. It does not connect: the first
// command does. Its errors never show a password.
func NewRedis(o RedisOptions) (redis.UniversalClient, error) {
	opts, err := redis.ParseURL(o.URL)
	if err != nil {
		return nil, fmt.Errorf("cluster: redis url %s: %w", redactURL(o.URL), redactErr(err, o.URL))
	}
	if o.PasswordEnv != "" && o.PasswordFile != "" {
		return nil, errors.New("cluster: redis: password_env and password_file are exclusive")
	}
	if o.PasswordEnv != "" {
		p, ok := os.LookupEnv(o.PasswordEnv)
		if !ok {
			return nil, fmt.Errorf("cluster: redis: environment variable %s is not set", o.PasswordEnv)
		}
		opts.Password = p
	}
	if o.PasswordFile != "" {
		b, err := os.ReadFile(o.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("cluster: redis: password file: %w", err)
		}
		first, _, _ := strings.Cut(string(b), "\n")
		opts.Password = strings.TrimRight(first, "\r")
		if opts.Password == "" {
			return nil, fmt.Errorf("cluster: redis: password file %s is empty", o.PasswordFile)
		}
	}
	if o.TLS != (TLSFiles{}) {
		if opts.TLSConfig == nil {
			return nil, errors.New("cluster: redis: tls files need a rediss:// url")
		}
		if err := o.TLS.apply(opts.TLSConfig); err != nil {
			return nil, err
		}
	}
	return redis.NewClient(opts), nil
}

// apply loads the files into c.
func (f TLSFiles) apply(c *tls.Config) error {
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return fmt.Errorf("cluster: redis tls: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("cluster: redis tls: no certificate in %s", f.CAFile)
		}
		c.RootCAs = pool
	}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return errors.New("cluster: redis tls: cert_file and key_file go together")
	}
	if f.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return fmt.Errorf("cluster: redis tls: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	c.ServerName = cmp.Or(f.ServerName, c.ServerName)
	return nil
}

// redactURL is u without its password, for messages.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable)"
	}
	return p.Redacted()
}

// redactErr replaces u's password in err's text, if it shows it (a
// parse error quotes the whole URL).
func redactErr(err error, u string) error {
	pw := urlPassword(u)
	if pw == "" || !strings.Contains(err.Error(), pw) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), pw, "xxxxx"))
}

// urlPassword finds the password in u's userinfo without parsing the
// rest (u may not parse).
func urlPassword(u string) string {
	_, rest, ok := strings.Cut(u, "://")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return ""
	}
	_, pw, _ := strings.Cut(rest[:at], ":")
	return pw
}
