package config

// Default returns the configuration an empty file gives: every default set,
// including the ones derived from others (Restart.MaxAttempts), and no
// destinations. It is for callers that build a Config in code, such as
// `switchboard agentcore`; they own the result.
func Default() *Config {
	c := defaultConfig()
	c.Restart.MaxAttempts = len(c.Restart.Delays)
	c.Restart.RetryMax = max(c.Restart.RetryMax, c.Restart.RetryAfter)
	return c
}
