//go:build !unix

package gateway

// defaultMaxConns: without getrlimit, 1024.
func defaultMaxConns() int { return 1024 }
