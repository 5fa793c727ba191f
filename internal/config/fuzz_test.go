package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse checks that no input makes Parse panic, and that it returns
// either a Config or an error.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob("testdata/*.*")
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("a: &a [*a]"))
	f.Add([]byte("{\"mcpServers\": {\"x\": {\"command\": \"\\ud83d\\ude00\"}}}"))
	// No file reads and a fixed environment: the fuzzer must not be able to
	// name a file to read.
	secrets := []byte("github:\n  GITHUB_TOKEN: ghp_x\ncontext7:\n  KEY: v\n")
	l := loader{
		lookupEnv: func(k string) (string, bool) {
			if strings.HasPrefix(k, "SET") {
				return "value", true
			}
			return "", false
		},
		readFile: func(name string) ([]byte, error) {
			if filepath.Base(name) == "secrets.yml" {
				return secrets, nil
			}
			return nil, fs.ErrNotExist
		},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := l.parse(data, "fuzz.yaml")
		if (c == nil) == (err == nil) {
			t.Fatalf("Parse returned %v and %v", c, err)
		}
		if err != nil {
			if errs, ok := err.(Errors); !ok || len(errs) == 0 {
				t.Fatalf("error %T %v, want non-empty Errors", err, err)
			}
			if strings.Contains(err.Error(), "ghp_x") {
				t.Fatalf("error reveals a secret: %v", err)
			}
			return
		}
		_ = c.SecretValues()
	})
}
