#!/usr/bin/env bash
# bench-obs.sh: observability's cost, measured as README's "Metrics and tracing, on and off" table is.
# Three gateways side by side (metrics and /ui on, the default; both off; on plus tracing of every
# call to an OTLP sink on loopback), the same mcpload run against each in turn, the order rotated
# every round; prints median calls/s per setting and each gateway's CPU per call.
#
#   scripts/bench-obs.sh [ROUNDS [DUR]]     (defaults 6 and 2s)
#
# Needs a release build in SWITCHBOARD_BIN [/tmp/switchboard] and ../shared/bench's upstream and
# mcpload in BENCH_BIN [/tmp/benchpeers/bin] (run.sh builds them there).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-6} DUR=${2:-2s}
SB=${SWITCHBOARD_BIN:-/tmp/switchboard} BIN=${BENCH_BIN:-/tmp/benchpeers/bin}
work=$(mktemp -d)
go build -o "$work/otlpsink" ./scripts/otlpsink
"$work/otlpsink" 24399 & sink=$!
names=(on off trace)
extras=("" $'metrics:\n  enabled: false\nui:\n  enabled: false\n' $'tracing:\n  endpoint: http://127.0.0.1:24399\n  sample_ratio: 1\n')
pids=()
for i in 0 1 2; do
	printf 'listen: 127.0.0.1:%s\ndestinations:\n  up:\n    type: stdio\n    command: %s/upstream\n    isolation: shared\n%s' \
		$((24500 + i)) "$BIN" "${extras[$i]}" >"$work/$i.yaml"
	MAX_STDIO_CONNECTIONS=1000 "$SB" serve --config "$work/$i.yaml" </dev/null >"$work/$i.log" 2>&1 &
	pids+=($!)
done
trap 'kill "${pids[@]}" "$sink" 2>/dev/null; rm -rf "$work"' EXIT
for i in 0 1 2; do
	for _ in $(seq 50); do curl -fs -o /dev/null "http://127.0.0.1:$((24500 + i))/healthz" && break; sleep 0.1; done
done
for s in "-c 1 -s 1" "-c 16 -s 1" "-c 16 -s 16"; do
	for r in $(seq "$ROUNDS"); do
		for k in 0 1 2; do
			i=$(((k + r) % 3))
			# shellcheck disable=SC2086 # $s is a list of flags
			"$BIN/mcpload" -url "http://127.0.0.1:$((24500 + i))/up/mcp" $s -d "$DUR" -warmup 500ms 2>/dev/null |
				python3 -c "import json,sys; print('$s|${names[$i]}|%d' % json.load(sys.stdin)['throughput'])"
		done
	done
done >"$work/results"
for i in 0 1 2; do echo "cpu|${names[$i]}|$(awk '{print ($14+$15)/100}' "/proc/${pids[$i]}/stat")"; done >>"$work/results"
python3 - "$work/results" "$DUR" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list); calls = collections.Counter(); cpu = {}
dur = float(sys.argv[2].rstrip('s'))
for l in open(sys.argv[1]):
    s, v, x = l.strip().split('|')
    if s == 'cpu': cpu[v] = float(x); continue
    d[(s, v)].append(int(x)); calls[v] += int(x) * dur
for s in ["-c 1 -s 1", "-c 16 -s 1", "-c 16 -s 16"]:
    off, on, tr = (statistics.median(d[(s, v)]) for v in ("off", "on", "trace"))
    print(f"{s:12s}  off {off:7.0f}  on {on:7.0f} ({on/off-1:+.1%})  trace {tr:7.0f} ({tr/on-1:+.1%} vs on)")
for v in ("off", "on", "trace"):
    print(f"{v:5s} gateway CPU per call {cpu[v]/calls[v]*1e6:.1f} µs")
PY
