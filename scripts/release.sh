#!/usr/bin/env bash
# release.sh — build the release binaries of Switchboard into dist/, with SHA256SUMS.
#
#   ./scripts/release.sh [TARGET...]       TARGET is os/arch or os/arm/7; default: all of
#                                          linux/amd64 linux/arm64 linux/arm/7 (Raspberry Pi 2/3
#                                          on 32-bit OS) darwin/amd64 darwin/arm64 windows/amd64
#
# Environment: VERSION (default `git describe --tags --always --dirty`), DIST (default dist).
# Each binary is static (CGO_ENABLED=0), built with -trimpath, and knows its version, commit
# and build date (`switchboard version`). Files: dist/switchboard-VERSION-OS-ARCH[v7][.exe],
# and dist/SHA256SUMS (check with `sha256sum -c SHA256SUMS` inside dist/).
set -euo pipefail
# Release binaries are built with Go 1.27.3 (taken from the module proxy): Go 1.26.8's standard library
# has vulnerabilities that Switchboard reaches (see .ci/run). GOTOOLCHAIN=local builds with the Go at hand.
export GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3}

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

VERSION="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
COMMIT="$(git rev-parse HEAD 2>/dev/null || true)"
# The commit's time, so that the same commit builds the same bytes; now if there is none.
DATE="$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || true)"
if [[ -z "$DATE" ]]; then
  DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
fi
DIST="${DIST:-dist}"

targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(linux/amd64 linux/arm64 linux/arm/7 darwin/amd64 darwin/arm64 windows/amd64)
fi

mkdir -p "$DIST"
ldflags="-s -w -X github.com/switchboard-mcp/switchboard/internal/buildinfo.version=$VERSION -X github.com/switchboard-mcp/switchboard/internal/buildinfo.commit=$COMMIT -X github.com/switchboard-mcp/switchboard/internal/buildinfo.date=$DATE"
files=()
for t in "${targets[@]}"; do
  IFS=/ read -r os arch arm <<<"$t"
  if [[ -z "$os" || -z "$arch" ]]; then
    echo "release.sh: target $t: want os/arch or os/arm/N" >&2
    exit 2
  fi
  name="switchboard-$VERSION-$os-$arch${arm:+v$arm}"
  [[ "$os" == windows ]] && name="$name.exe"
  echo "release.sh: $name"
  TZ=UTC CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" GOARM="$arm" \
    go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$DIST/$name" ./cmd/switchboard
  files+=("$name")
done

(cd "$DIST" && sha256sum "${files[@]}" >SHA256SUMS)
echo "release.sh: $DIST/SHA256SUMS"
cat "$DIST/SHA256SUMS"
