#!/usr/bin/env bash
# test.sh — THE test command of Switchboard.
#
#   ./scripts/test.sh [go test flags...] [packages...]
#
# 1. installs the real MCP peers (./scripts/install-peers.sh; a no-op when already installed),
# 2. go vet on the packages,
# 3. go test -race -count=1 on the packages, with SWITCHBOARD_PEERS=<repo>/.cache and
#    SWITCHBOARD_REQUIRE_PEERS=1 exported, so a test that needs a missing peer fails instead of skipping.
#
# Arguments go to `go test` as they are. Those that start with ./ ../ / or the module path are the
# packages (default ./...); everything else is a go test flag, so give path-valued flags as
# -flag=value. Examples:
#   ./scripts/test.sh                                  # everything
#   ./scripts/test.sh -run Conformance ./internal/...  # a subset
#   ./scripts/test.sh -short                           # skip the tests that run real peers
#   ./scripts/test.sh -v -run TestX ./internal/peertest
# -timeout defaults to 8m (per test binary); pass -timeout=... to change it.
# The output ends with go test's own ok/FAIL lines, and the exit status is go test's.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
MODULE="$(sed -n 's/^module[[:space:]]\+//p' go.mod | head -n1)"

flags=()
pkgs=()
for a in "$@"; do
  case "$a" in
    ./*|../*|/*|.|..|"$MODULE"|"$MODULE"/*) pkgs+=("$a") ;;
    *) flags+=("$a") ;;
  esac
done
[[ ${#pkgs[@]} -gt 0 ]] || pkgs=(./...)

bash "$REPO/scripts/install-peers.sh"

export SWITCHBOARD_PEERS="${SWITCHBOARD_PEERS:-$REPO/.cache}"
export SWITCHBOARD_REQUIRE_PEERS=1

go vet "${pkgs[@]}"

exec go test -race -count=1 -timeout=8m ${flags[@]+"${flags[@]}"} "${pkgs[@]}"
