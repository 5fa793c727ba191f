package peertest

import "testing"

// AWS4 returns the absolute path of aws4.js, the npm aws4 package (an
// independent SigV4 signer in JavaScript, installed into <cache>/aws4 by
// ./scripts/install-peers.sh), for require() under Node.
func AWS4(t testing.TB) string {
	t.Helper()
	needVersion(t, "aws4", "aws4", "")
	return need(t, "aws4", "aws4/node_modules/aws4/aws4.js", false)
}
