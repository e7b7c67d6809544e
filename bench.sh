#!/bin/bash
# bench.sh: wall-clock times of sage-sandbox, median of N runs each.
# Usage: ./bench.sh [N]   (default 7; run as the account with rootless podman)
# Machines are noisy: compare medians from one session, not across machines.
set -euo pipefail
n=${1:-7}
bin=$(cd "$(dirname "$0")" && pwd)/sage-sandbox
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# median_ms NAME COMMAND...: runs COMMAND n times, prints its median in ms.
median_ms() {
	local name=$1 i start end
	shift
	for ((i = 0; i < n; i++)); do
		start=$(date +%s%N)
		"$@" >/dev/null 2>&1 || true
		end=$(date +%s%N)
		echo $(((end - start) / 1000000))
	done | sort -n | awk -v name="$name" -v n="$n" \
		'{ t[NR] = $1 } END { printf "%-34s median %5d ms  (min %d, max %d, n=%d)\n", name, t[int((NR + 1) / 2)], t[1], t[NR], n }'
}

echo 'print(1)' >"$tmp/one.sage"
echo 'import time; time.sleep(30)' >"$tmp/sleep.sage"
echo 'while True: print("x" * 1000)' >"$tmp/flood.sage"
median_ms "status" "$bin" status
median_ms "run print(1)" "$bin" run "$tmp/one.sage"
median_ms "run examples/seed.sage" "$bin" run "$(dirname "$bin")/examples/seed.sage"
median_ms "self-test" "$bin" self-test
median_ms "run --timeout 2 (sleep): stop" "$bin" run --timeout 2 "$tmp/sleep.sage"
median_ms "run --output-limit 16 (flood): stop" "$bin" run --output-limit 16 "$tmp/flood.sage"
