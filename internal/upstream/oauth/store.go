package oauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// Record is what a login leaves behind for one remote server: the client
// the authorization server knows us by, its endpoints, and the tokens. It
// holds secrets (the tokens and any client secret): it is written only to
// a Store, never logged.
type Record struct {
	// Resource is the MCP server URL the tokens were issued for (RFC 8707).
	Resource string `json:"resource"`
	// ClientID and ClientSecret are the client the tokens belong to:
	// dynamically registered, pre-registered or a metadata document URL.
	// ClientSecret is "" for a public client.
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret,omitempty"`
	// AuthURL and TokenURL are the authorization server's endpoints;
	// AuthStyle is how the client authenticates at TokenURL
	// (oauth2.AuthStyle).
	AuthURL   string           `json:"authorization_endpoint,omitempty"`
	TokenURL  string           `json:"token_endpoint"`
	AuthStyle oauth2.AuthStyle `json:"auth_style,omitempty"`
	// Scopes are the scopes asked for at login.
	Scopes []string `json:"scopes,omitempty"`
	// Token is the latest token: access token, refresh token, expiry.
	// Nil once the server refused the refresh token (see Refused).
	Token *oauth2.Token `json:"token"`
	// Refused says why the tokens were dropped (the refresh token was
	// refused): a person must log in again. "" while they work.
	Refused string `json:"refused,omitempty"`
	// Saved is when the record was written.
	Saved time.Time `json:"saved"`
}

// Store keeps Records by key (a destination's name). Implementations are
// safe for concurrent use.
type Store interface {
	// Load returns the record of key, or nil and no error if there is none.
	Load(key string) (*Record, error)
	// Save replaces the record of key.
	Save(key string, r *Record) error
	// Delete removes the record of key; deleting none is not an error.
	Delete(key string) error
	// Version is a value that changes whenever the record of key may have
	// changed, by this process or another (a file's modification time):
	// a Client reloads the record when it differs from the one it loaded.
	Version(key string) string
}

// FileStore keeps each record in its own JSON file, Dir/KEY.json, of mode
// 0600 in a directory of mode 0700. A save writes a temporary file and
// renames it over the old one, so a reader never sees half a record.
type FileStore struct {
	// Dir is the directory of the files. Required.
	Dir string
}

// Path is the file that holds the record of key.
func (s FileStore) Path(key string) string { return filepath.Join(s.Dir, key+".json") }

// Load implements Store.
func (s FileStore) Load(key string) (*Record, error) {
	b, err := os.ReadFile(s.Path(key))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		// The error names a position, never the file's content.
		return nil, fmt.Errorf("token file %s: %v", s.Path(key), err)
	}
	return &r, nil
}

// Save implements Store.
func (s FileStore) Save(key string, r *Record) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(s.Dir, "."+key+".*.tmp") // mode 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename there is nothing left to remove
	_, err = f.Write(b)
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	return os.Rename(tmp, s.Path(key))
}

// Delete implements Store.
func (s FileStore) Delete(key string) error {
	err := os.Remove(s.Path(key))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// Version implements Store: the file's modification time and size, "" when
// there is no file.
func (s FileStore) Version(key string) string {
	fi, err := os.Stat(s.Path(key))
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%d/%d", fi.ModTime().UnixNano(), fi.Size())
}

// MemoryStore is a Store in memory, for a relay that keeps no state and for
// tests. The zero value is ready to use.
type MemoryStore struct {
	mu      sync.Mutex
	records map[string]Record // guarded by mu
	version int               // guarded by mu: bumped by every change
}

// Load implements Store.
func (m *MemoryStore) Load(key string) (*Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.records[key]
	if !ok {
		return nil, nil
	}
	return r.clone(), nil
}

// Save implements Store.
func (m *MemoryStore) Save(key string, r *Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.records == nil {
		m.records = map[string]Record{}
	}
	m.records[key] = *r.clone()
	m.version++
	return nil
}

// clone returns a copy of r that shares no token with it.
func (r Record) clone() *Record {
	if r.Token != nil {
		t := *r.Token
		r.Token = &t
	}
	return &r
}

// Delete implements Store.
func (m *MemoryStore) Delete(key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.records, key)
	m.version++
	return nil
}

// Version implements Store.
func (m *MemoryStore) Version(string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return fmt.Sprint(m.version)
}

// DefaultDir is the directory of the token files when none is configured:
// $SWITCHBOARD_STATE_DIR/oauth, else $XDG_STATE_HOME/switchboard/oauth, else
// ~/.local/state/switchboard/oauth.
func DefaultDir() (string, error) {
	if d := os.Getenv("SWITCHBOARD_STATE_DIR"); d != "" {
		return filepath.Join(d, "oauth"), nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "switchboard", "oauth"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no state directory for OAuth tokens: set SWITCHBOARD_STATE_DIR (%v)", err)
	}
	return filepath.Join(home, ".local", "state", "switchboard", "oauth"), nil
}
