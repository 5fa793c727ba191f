#!/usr/bin/env bash
# install.sh — install Switchboard as a systemd service (Raspberry Pi OS, Debian, …).
#
#   sudo deploy/install.sh [BINARY]              install or update; BINARY defaults to a
#                                                `go build` of this checkout (needs Go)
#   sudo deploy/install.sh --uninstall [--purge] remove the service and the binary; --purge
#                                                also removes /etc/switchboard, the state,
#                                                cache and log directories and the user
#
# What it installs:
#   $PREFIX/bin/switchboard                      the binary (PREFIX defaults to /usr/local)
#   /etc/switchboard/switchboard.yaml            deploy/switchboard.yaml, only if there is no config yet
#   /etc/systemd/system/switchboard.service      deploy/systemd/switchboard.service
#   a "switchboard" system user                  so secrets.yml can be root:switchboard 0640
# then `systemctl daemon-reload` and `systemctl enable switchboard` (and a restart if it
# was running and something changed). Running it again changes nothing that is up to date.
#
# DESTDIR=/some/root installs into that tree instead (packaging, tests): no user is
# created, no file ownership changed and systemctl is not run. systemctl is also skipped
# when systemd is not running (a container, a chroot).
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

DESTDIR="${DESTDIR:-}"
PREFIX="${PREFIX:-/usr/local}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"

BIN="$PREFIX/bin/switchboard"
CONFDIR=/etc/switchboard
UNIT=/etc/systemd/system/switchboard.service
SERVICE_USER=switchboard

mode=install
purge=0
binary=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --uninstall) mode=uninstall ;;
    --purge) purge=1 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "install.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *)
      [[ -z "$binary" ]] || { echo "install.sh: one binary only" >&2; exit 2; }
      binary="$1" ;;
  esac
  shift
done
if [[ $purge == 1 && $mode != uninstall ]]; then
  echo "install.sh: --purge goes with --uninstall" >&2
  exit 2
fi

say() { echo "install.sh: $*"; }

# live: acting on this machine itself (not a DESTDIR tree).
live() { [[ -z "$DESTDIR" ]]; }
# systemd_up: systemctl can be used (the sd_booted test).
systemd_up() { live && [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null; }

if live && [[ $EUID -ne 0 ]]; then
  echo "install.sh: run as root (sudo $0 …), or set DESTDIR to install into a tree" >&2
  exit 1
fi

# put SRC DEST MODE: install SRC as DEST unless DEST already has the same content and
# mode; says what it did, and sets changed=1 if it changed DEST.
changed=0
put() {
  local src="$1" dest="$2" mode="$3"
  if [[ -f "$dest" ]] && cmp -s "$src" "$dest" && [[ "$(stat -c %a "$dest")" == "${mode#0}" ]]; then
    say "unchanged $dest"
    return 0
  fi
  install -D -m "$mode" "$src" "$dest"
  say "installed $dest"
  changed=1
}

do_install() {
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT

  if [[ -z "$binary" ]]; then
    command -v go >/dev/null || { echo "install.sh: no binary given and no Go to build one: install.sh path/to/switchboard" >&2; exit 1; }
    local version
    version="$(git -C "$REPO" describe --tags --always --dirty 2>/dev/null || echo dev)"
    say "building switchboard $version"
    (cd "$REPO" && CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/switchboard-mcp/switchboard/internal/buildinfo.version=$version -X github.com/switchboard-mcp/switchboard/internal/buildinfo.commit=$(git -C "$REPO" rev-parse HEAD 2>/dev/null || true) -X github.com/switchboard-mcp/switchboard/internal/buildinfo.date=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
      -o "$tmp/switchboard" ./cmd/switchboard)
    binary="$tmp/switchboard"
  fi
  [[ -f "$binary" && -x "$binary" ]] || { echo "install.sh: $binary is not an executable file" >&2; exit 1; }
  if ! "$binary" version >/dev/null 2>&1; then
    echo "install.sh: $binary does not run here (built for another system?)" >&2
    exit 1
  fi

  if live && ! getent passwd "$SERVICE_USER" >/dev/null; then
    useradd --system --user-group --no-create-home --home-dir /var/lib/switchboard \
      --shell /usr/sbin/nologin --comment "Switchboard MCP gateway" "$SERVICE_USER"
    say "created system user $SERVICE_USER"
  fi

  put "$binary" "$DESTDIR$BIN" 0755

  # The unit names $PREFIX/bin/switchboard.
  sed "s#/usr/local/bin/switchboard#$BIN#g" "$HERE/systemd/switchboard.service" >"$tmp/switchboard.service"
  put "$tmp/switchboard.service" "$DESTDIR$UNIT" 0644

  install -d -m 0755 "$DESTDIR$CONFDIR"
  if [[ -e "$DESTDIR$CONFDIR/switchboard.yaml" ]]; then
    say "kept $DESTDIR$CONFDIR/switchboard.yaml"
  else
    install -m 0644 "$HERE/switchboard.yaml" "$DESTDIR$CONFDIR/switchboard.yaml"
    say "installed $DESTDIR$CONFDIR/switchboard.yaml (an example: edit it)"
  fi
  if live && [[ -f "$CONFDIR/secrets.yml" ]]; then
    chown root:"$SERVICE_USER" "$CONFDIR/secrets.yml"
    chmod 0640 "$CONFDIR/secrets.yml"
  fi
  "$DESTDIR$BIN" check --config "$DESTDIR$CONFDIR/switchboard.yaml" || say "warning: the config has errors (above)"

  if systemd_up; then
    systemctl daemon-reload
    systemctl enable switchboard.service
    if [[ $changed == 1 ]] && systemctl is-active --quiet switchboard.service; then
      systemctl restart switchboard.service
      say "restarted switchboard.service"
    elif ! systemctl is-active --quiet switchboard.service; then
      say "start it with: systemctl start switchboard"
    fi
  elif live; then
    say "systemd is not running: start $BIN serve --config $CONFDIR/switchboard.yaml yourself"
  fi
}

do_uninstall() {
  if systemd_up; then
    systemctl disable --now switchboard.service 2>/dev/null || true
  fi
  local f
  for f in "$DESTDIR$UNIT" "$DESTDIR$BIN"; do
    if [[ -e "$f" ]]; then
      rm -f "$f"
      say "removed $f"
    fi
  done
  if systemd_up; then
    systemctl daemon-reload
  fi
  if [[ $purge == 0 ]]; then
    [[ -d "$DESTDIR$CONFDIR" ]] && say "kept $DESTDIR$CONFDIR (--purge removes it)"
    return 0
  fi
  for f in "$DESTDIR$CONFDIR" "$DESTDIR/var/lib/switchboard" "$DESTDIR/var/lib/private/switchboard" \
    "$DESTDIR/var/cache/switchboard" "$DESTDIR/var/cache/private/switchboard" \
    "$DESTDIR/var/log/switchboard" "$DESTDIR/var/log/private/switchboard"; do
    if [[ -e "$f" || -L "$f" ]]; then
      rm -rf "$f"
      say "removed $f"
    fi
  done
  if live && getent passwd "$SERVICE_USER" >/dev/null; then
    userdel "$SERVICE_USER" 2>/dev/null || true
    say "removed user $SERVICE_USER"
  fi
}

"do_$mode"
