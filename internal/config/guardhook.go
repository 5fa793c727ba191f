package config

import (
	"net/url"
	"slices"
	"time"
)

// GuardHook is an external classifier (an HTTP service: a model, an LLM
// judge) asked about tools/call arguments and results (`guards.hook`;
// docs/guards.md "External hook"). Nil (absent, the default): no hook,
// nothing is sent anywhere and the request path is unchanged.
type GuardHook struct {
	// URL is where each check is POSTed (`url`, http or https); required.
	// Redacted from logs (it may carry a key in its query).
	URL string `yaml:"url" decode:"secret"`

	// Timeout bounds one check, connection included (`timeout`). Default
	// 2s; always > 0.
	Timeout time.Duration `yaml:"timeout" min:"1"`

	// Fail is what a check that gets no valid answer (timeout, connection
	// refused, a status other than 200, a malformed answer) does
	// (`fail`): open (the message passes, the audit record says so) or
	// closed (the call is refused, or its result withheld). Required: no
	// default, the operator says which.
	Fail string `yaml:"fail"`

	// Directions are what is sent (`directions`): arguments (before the
	// call goes to the server), result (before the result goes to the
	// client). Default both.
	Directions []string `yaml:"directions"`

	// MaxBytes caps the string bytes sent per check (`max_bytes`); the
	// strings past it are not sent (the request's "unsent" counts them).
	// Default 256 KiB.
	MaxBytes int64 `yaml:"max_bytes" min:"1"`

	// TokenEnv names an environment variable holding a bearer token sent
	// as Authorization (`token_env`); "" none. Read at each (re)load,
	// never logged. At most one of it and TokenFile.
	TokenEnv string `yaml:"token_env"`

	// TokenFile is a file whose first line is the bearer token
	// (`token_file`, a Kubernetes Secret); relative to the configuration
	// file; "" none.
	TokenFile string `yaml:"token_file"`

	// Destinations are the destinations checked (`destinations`); nil
	// (the default): every destination.
	Destinations []string `yaml:"destinations"`
}

// Hook directions and failure modes, as written in the config.
const (
	HookArguments  = "arguments"
	HookResult     = "result"
	HookFailOpen   = "open"
	HookFailClosed = "closed"
)

// Defaults of GuardHook.
const (
	DefaultHookTimeout  = 2 * time.Second
	DefaultHookMaxBytes = 256 << 10
)

func (h *GuardHook) setDefaults() {
	*h = GuardHook{Timeout: DefaultHookTimeout, MaxBytes: DefaultHookMaxBytes}
}

// HookFor returns the hook that checks destination name, or nil.
func (g *Guards) HookFor(name string) *GuardHook {
	if g == nil || g.Hook == nil {
		return nil
	}
	if g.Hook.Destinations != nil && !slices.Contains(g.Hook.Destinations, name) {
		return nil
	}
	return g.Hook
}

// Sends reports whether the hook is asked about direction dir
// (HookArguments or HookResult).
func (h *GuardHook) Sends(dir string) bool {
	return h != nil && (h.Directions == nil || slices.Contains(h.Directions, dir))
}

// validateGuardHook checks the hook block.
func (d *decoder) validateGuardHook(c *Config) {
	if c.Guards == nil || c.Guards.Hook == nil {
		return
	}
	h := c.Guards.Hook
	const p = "guards.hook"
	if u, err := url.Parse(h.URL); h.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL may hold a key: never quoted.
		d.errorAt(p+".url", "required: the hook's http:// or https:// URL")
	}
	if h.Fail == "" {
		d.errorAt(p+".fail", "required: open (a failed check lets the message pass) or closed (it refuses it)")
	} else {
		d.oneOf(p+".fail", p+".fail", "invalid", h.Fail, HookFailOpen, HookFailClosed)
	}
	for i, dir := range h.Directions {
		ip := index(p+".directions", i)
		d.oneOf(ip, ip, "unknown direction", dir, HookArguments, HookResult)
	}
	if h.TokenEnv != "" && h.TokenFile != "" {
		d.errorAt(p+".token_file", "give token_env or token_file, not both")
	}
	for i, name := range h.Destinations {
		if _, ok := c.Destinations[name]; !ok {
			d.errorAt(index(p+".destinations", i), "unknown destination %q", name)
		}
	}
}
