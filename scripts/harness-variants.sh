#!/usr/bin/env bash
# harness-variants.sh: ../shared/bench/run.sh with variants of Switchboard as extra targets, so that
# they are measured in one run beside stdio and http-native (settings outer, targets inner):
#   switchboard          SWITCHBOARD_BIN as it is
#   switchboard-before   BEFORE_BIN (e.g. a build of an older commit), when set
#   switchboard-guards   SWITCHBOARD_BIN with every guard on: pinning monitor, detectors
#                        [hidden, markup, secrets, pii], action monitor
#   switchboard-cluster  SWITCHBOARD_BIN in cluster mode, one replica, with a redis-server this
#                        script starts on a loopback port (stopped by PID at the end)
# The harness is copied to a temporary directory and patched there; ../shared is not changed. LARGE=1
# also adds a 64 KiB one-call setting beside the harness's 256 KiB and 1 MiB ones. Every other
# variable (ROUNDS, DUR, SHORT, LARGE, TARGETS, RESULTS) is the harness's.
#
#   SWITCHBOARD_BIN=/tmp/switchboard BEFORE_BIN=/tmp/switchboard-before ROUNDS=3 LARGE=1 DUR=5s SHORT=2s \
#     scripts/harness-variants.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bench=${BENCH_DIR:-$root/../shared/bench}
: "${SWITCHBOARD_BIN:?a release build of switchboard}"
work=$(mktemp -d)
redis=
cleanup() {
	[ -n "$redis" ] && kill "$redis" 2>/dev/null && wait "$redis" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
cp -r "$bench" "$work/bench"
mkdir "$work/bin"

variants="switchboard"
if [ -n "${BEFORE_BIN:-}" ]; then
	printf '#!/bin/sh\nexec %q "$@"\n' "$BEFORE_BIN" >"$work/bin/switchboard-before"
	variants+=" switchboard-before"
fi
cat >"$work/bin/switchboard-guards" <<EOF2
#!/bin/sh
# the last argument is the config the harness wrote: every guard on
eval cfg=\\\${\$#}
printf 'guards:\\n  defaults:\\n    pinning: monitor\\n    detectors: [hidden, markup, secrets, pii]\\n    action: monitor\\n' >>"\$cfg"
exec $SWITCHBOARD_BIN "\$@"
EOF2
variants+=" switchboard-guards"
if command -v redis-server >/dev/null; then
	port=$((26400 + RANDOM % 1000))
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >"$work/redis.log" 2>&1 &
	redis=$!
	cat >"$work/bin/switchboard-cluster" <<EOF2
#!/bin/sh
# the last argument is the config the harness wrote: cluster mode, one replica, Redis
eval cfg=\\\${\$#}
printf 'cluster:\\n  replica_id: r1\\n  keys: ["harness-sealing-key-0123456789abcdef0123"]\\n  redis:\\n    url: redis://127.0.0.1:$port/0\\n' >>"\$cfg"
exec $SWITCHBOARD_BIN "\$@"
EOF2
	variants+=" switchboard-cluster"
else
	echo "no redis-server: switchboard-cluster is left out" >&2
fi
chmod +x "$work"/bin/*

# the harness's switchboard target, for every variant (binary from $work/bin, config per target)
python3 - "$work/bench/run.sh" "$work/bin" <<'EOF2'
import sys
p, bindir = sys.argv[1], sys.argv[2]
s = open(p).read()
def sub(old, new):
    global s
    if old not in s:
        sys.exit("harness-variants.sh: run.sh changed, cannot patch: " + old.splitlines()[0])
    s = s.replace(old, new, 1)
sub('\t\t"-tool echo -size 262144 -c 1 -s 1 -d $DUR"',
    '\t\t"-tool echo -size 65536 -c 1 -s 1 -d $DUR"\n\t\t"-tool echo -size 262144 -c 1 -s 1 -d $DUR"')
sub('\tswitchboard)\n\t\tcat', '\tswitchboard|switchboard-*)\n\t\tbin=$SWITCHBOARD_BIN; [ "$t" = switchboard ] || bin=' + bindir + '/$t\n\t\tcat')
sub('"$RESULTS/switchboard.yaml" <<-EOF', '"$RESULTS/$t.yaml" <<-EOF')
sub('"$SWITCHBOARD_BIN" serve --config "$RESULTS/switchboard.yaml"', '"$bin" serve --config "$RESULTS/$t.yaml"')
open(p, 'w').write(s)
EOF2
TARGETS=${TARGETS:-"stdio http-native $variants"} bash "$work/bench/run.sh"
