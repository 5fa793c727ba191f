package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestSecretsRedacted(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-0123456789"
	d := &Destination{Name: "x", Type: TypeStdio, Secrets: Secrets{"API_KEY": secret}}
	c := &Config{Destinations: map[string]*Destination{"x": d}}

	var outs []string
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		outs = append(outs, fmt.Sprintf(format, d), fmt.Sprintf(format, *d), fmt.Sprintf(format, d.Secrets))
	}
	outs = append(outs, fmt.Sprint(c), fmt.Sprintf("%+v", *c), d.Secrets.String(), d.Secrets.GoString())

	j, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var logBuf bytes.Buffer
	slog.New(slog.NewJSONHandler(&logBuf, nil)).Info("loaded", "secrets", d.Secrets, "dest", d)
	outs = append(outs, string(j), string(y), logBuf.String())

	for _, out := range outs {
		if strings.Contains(out, secret) || strings.Contains(out, fmt.Sprintf("%x", secret)) {
			t.Errorf("secret printed: %s", out)
		}
	}
	if got, want := fmt.Sprintf("%v", *d), "API_KEY:[REDACTED]"; !strings.Contains(got, want) {
		t.Errorf("%%v = %s, want it to contain %s", got, want)
	}
	if got, want := fmt.Sprintf("%#v", d.Secrets), `config.Secrets{"API_KEY":"[REDACTED]"}`; got != want {
		t.Errorf("%%#v = %s, want %s", got, want)
	}
	if got := d.Secrets["API_KEY"]; got != secret {
		t.Errorf("indexing = %q, want the value", got)
	}
}

func TestSecretValues(t *testing.T) {
	t.Parallel()
	c := &Config{
		Destinations: map[string]*Destination{
			"a": {Secrets: Secrets{"K": "abc", "L": "long-secret", "M": "dup-value"}},
			"b": {Secrets: Secrets{"K": "dup-value"}},
		},
		substituted: []string{"env-value", "xy", "dup-value"},
	}
	got := c.SecretValues()
	want := []string{"long-secret", "dup-value", "env-value"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("SecretValues() = %q, want %q", got, want)
	}
	if v := (&Config{}).SecretValues(); v != nil {
		t.Errorf("empty Config: %q", v)
	}
}
