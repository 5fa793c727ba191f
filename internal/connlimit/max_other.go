//go:build !unix

package connlimit

// DefaultMax: without getrlimit, 1024.
func DefaultMax() int { return 1024 }
