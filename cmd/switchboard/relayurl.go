package main

import (
	"fmt"
	"net/url"
	"strings"
)

// checkRelayURL reports, in words a user can act on, why s cannot be the
// relay's --url; nil when it can. It runs before anything starts, so a
// mistyped URL is an exit-2 usage error, not a failed connection later.
func checkRelayURL(s string) error {
	if !strings.Contains(s, "://") {
		return fmt.Errorf("--url %q has no scheme: add http:// or https:// (https://%s)", s, s)
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("--url: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("--url %q: the scheme must be http:// or https://, not %s://", s, u.Scheme)
	}
	if u.Host == "" {
		return fmt.Errorf("--url %q has no host", s)
	}
	return nil
}
