package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Secrets maps environment-style names to secret values. Every way of
// printing or encoding it (fmt verbs, slog, JSON, YAML) shows the names
// with the value "[REDACTED]"; read the values by indexing.
type Secrets map[string]string

const redactedValue = "[REDACTED]"

func (s Secrets) redacted() map[string]string {
	if s == nil {
		return nil
	}
	m := make(map[string]string, len(s))
	for k := range s {
		m[k] = redactedValue
	}
	return m
}

// String returns the names with redacted values, as "map[KEY:[REDACTED]]".
func (s Secrets) String() string { return fmt.Sprint(s.redacted()) }

// GoString returns a Go-syntax form with redacted values.
func (s Secrets) GoString() string {
	if s == nil {
		return "config.Secrets(nil)"
	}
	var b strings.Builder
	b.WriteString("config.Secrets{")
	for i, k := range slices.Sorted(maps.Keys(s)) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q:%q", k, redactedValue)
	}
	b.WriteString("}")
	return b.String()
}

// Format implements fmt.Formatter so that every verb, %#v included, prints
// redacted values.
func (s Secrets) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		fmt.Fprint(f, s.GoString())
		return
	}
	fmt.Fprint(f, s.String())
}

// LogValue implements slog.LogValuer.
func (s Secrets) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON encodes the names with redacted values.
func (s Secrets) MarshalJSON() ([]byte, error) { return json.Marshal(s.redacted()) }

// MarshalYAML encodes the names with redacted values.
func (s Secrets) MarshalYAML() (any, error) { return s.redacted(), nil }

// loadSecrets reads the secrets file named by c.SecretsFile, or the default
// one beside the configuration file, into d.secrets, and sets c.SecretsFile
// to the path read. readFile reads a file; dir is the configuration file's
// directory.
//
// The environment variable SECRETS_CONFIG, when set, names the file
// instead (relative to the working directory), overriding secrets_file.
func (d *decoder) loadSecrets(c *Config, dir string, readFile func(string) ([]byte, error)) {
	names, explicit := []string{c.SecretsFile}, c.SecretsFile != ""
	if !explicit {
		names = []string{"secrets.yml", "secrets.yaml"}
	}
	errPath, errLine := "secrets_file", d.line("secrets_file")
	if v, ok := d.lookupEnv("SECRETS_CONFIG"); ok && v != "" {
		if abs, err := filepath.Abs(v); err == nil {
			v = abs
		}
		names, explicit, errPath, errLine = []string{v}, true, "SECRETS_CONFIG", 0
	}
	c.SecretsFile = ""
	for _, name := range names {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		data, err := readFile(p)
		if err != nil {
			if !explicit && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			*d.errs = append(*d.errs, &posError{file: d.file, line: errLine, path: errPath, msg: err.Error(), err: err})
			return
		}
		c.SecretsFile = p
		sd := newDecoder(p, d.lookupEnv, d.errs)
		d.secrets = sd.parseSecrets(data)
		d.secretsAt = sd.secretsAt
		return
	}
}

// parseSecrets decodes a secrets file: destination name -> {NAME: value}.
// Its messages never quote a value.
func (d *decoder) parseSecrets(data []byte) map[string]Secrets {
	root, err := parseYAML(data)
	if err != nil {
		d.syntaxErr(err)
		return nil
	}
	out := map[string]Secrets{}
	d.each(root, "", func(dest string, v *yaml.Node, dpath string) {
		d.secretsAt[dest] = d.pos[dpath]
		s := Secrets{}
		d.each(v, dpath, func(key string, v *yaml.Node, kpath string) {
			if !isEnvName(key) {
				d.errorf(v, dpath, "invalid name %q: want letters, digits and _, not starting with a digit", key)
				return
			}
			if v = resolve(v); v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
				d.errorf(v, kpath, "expected a string, got %s (quote the value)", describe(v))
				return
			}
			s[key] = v.Value
		})
		out[dest] = s
	})
	return out
}
