package config

import (
	"io/fs"
	"reflect"
	"testing"
)

// TestDefaultIsAnEmptyFile: Default equals what an empty file loads to.
func TestDefaultIsAnEmptyFile(t *testing.T) {
	l := loader{lookupEnv: func(string) (string, bool) { return "", false },
		readFile: func(string) ([]byte, error) { return nil, fs.ErrNotExist }}
	parsed, err := l.parse([]byte("{}\n"), "/nonexistent/switchboard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	parsed.SecretsFile, parsed.substituted = "", nil
	if got := Default(); !reflect.DeepEqual(got, parsed) {
		t.Errorf("Default() = %+v\nan empty file = %+v", got, parsed)
	}
}
