#!/usr/bin/env bash
# soak.sh: issue 27's soak. Drives N calls through a shared or per-session stdio child behind Switchboard
# (timeout 3s) with ../shared/bench's mcpload, then prints mcpload's result line and the stalled-calls
# metric by stage. The gateway, the child and mcpload run at NICE (default -10: ahead of whatever else
# the machine runs, so a hold the watchdog counts is not the kernel starving the child).
#
#   scripts/soak.sh ISOLATION IN_FLIGHT CALLS        e.g. scripts/soak.sh shared 16 5000000
#
# Needs a release build in SWITCHBOARD_BIN [/tmp/switchboard] and the bench's upstream and mcpload in
# BENCH_BIN [/tmp/benchpeers/bin] (../shared/bench/run.sh builds them there).
# LOG_DIR: when set, the gateway's log is kept there as soak-ISOLATION-IN_FLIGHT-TIME.log.
# DUMP_ON_STALL=1: send SIGUSR1 to the gateway's children when it logs a call held at stage server (for an
# upstream built with a flight recorder that writes its trace on SIGUSR1; any other child would die of it).
set -euo pipefail
iso=${1:?isolation: shared or session} c=${2:?calls in flight} n=${3:?calls}
SB=${SWITCHBOARD_BIN:-/tmp/switchboard} BIN=${BENCH_BIN:-/tmp/benchpeers/bin} NICE=${NICE:--10}
port=${PORT:-24600}
sessions=1
[ "$iso" = session ] && sessions=$c
if curl -s -o /dev/null "http://127.0.0.1:$port/healthz"; then
	echo "soak.sh: something already listens on 127.0.0.1:$port (a gateway of an earlier soak?)" >&2
	exit 1
fi
work=$(mktemp -d)
printf 'listen: 127.0.0.1:%s\ntimeout: 3s\ndestinations:\n  up:\n    type: stdio\n    command: %s/upstream\n    isolation: %s\nnamespaces:\n  bench:\n    servers: [up]\n    tool_prefix: never\n' \
	"$port" "$BIN" "$iso" >"$work/sb.yaml"
MAX_STDIO_CONNECTIONS=1000 nice -n "$NICE" "$SB" serve --config "$work/sb.yaml" </dev/null >"$work/sb.log" 2>&1 &
sb=$!
watch=
if [ "${DUMP_ON_STALL:-0}" = 1 ]; then
	tail -n0 -F "$work/sb.log" 2>/dev/null | while read -r line; do
		case $line in *"call stalled"*stage=server*)
			for k in $(pgrep -P "$sb"); do kill -USR1 "$k"; done
			echo "dumped the children's traces at $(date +%T.%N): $line" >&2 ;;
		esac
	done &
	watch=$!
fi
# finish stops what the soak started; no step may end it early (set -e does not apply here).
finish() {
	set +e
	if [ -n "$watch" ]; then
		pkill -P "$watch" 2>/dev/null
		kill "$watch" 2>/dev/null
	fi
	kill "$sb" 2>/dev/null
	wait "$sb" 2>/dev/null
	if [ -n "${LOG_DIR:-}" ]; then cp "$work/sb.log" "$LOG_DIR/soak-$iso-$c-$(date +%H%M%S).log"; fi
	rm -rf "$work"
}
trap finish EXIT
for _ in $(seq 100); do curl -fs -o /dev/null "http://127.0.0.1:$port/healthz" && break; sleep 0.1; done
start=$(date +%s)
nice -n "$NICE" "$BIN/mcpload" -url "http://127.0.0.1:$port/mcp/bench" -c "$c" -s "$sessions" -n "$n" -timeout 10s
echo "isolation=$iso in_flight=$c calls=$n seconds=$(($(date +%s) - start))"
curl -fs "http://127.0.0.1:$port/metrics" | grep '^switchboard_calls_stalled_total' || true
grep -c 'call stalled' "$work/sb.log" || true
grep 'call stalled' "$work/sb.log" | head -20 || true
