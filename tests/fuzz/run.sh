#!/bin/sh
# tests/fuzz/run.sh SECONDS TARGET...: runs each libFuzzer target of
# build-fuzz/ for SECONDS, from its seed corpus (tests/fuzz/corpus/TARGET,
# only read) and what it finds on the way (a temporary directory, dropped).
# A crash, a leak or a sanitizer's finding fails it, and the input that
# caused it is kept in build-fuzz/ and named.
set -eu
seconds=$1
shift
status=0
for target in "$@"; do
	found=$(mktemp -d)
	if build-fuzz/"$target" -max_total_time="$seconds" -print_final_stats=0 \
		-artifact_prefix=build-fuzz/"$target"- "$found" tests/fuzz/corpus/"$target" \
		>build-fuzz/"$target".log 2>&1; then
		echo "ok - fuzz $target for $seconds s: $(grep -o 'cov: [0-9]*' build-fuzz/"$target".log | tail -n 1), $(ls "$found" | wc -l) new inputs"
	else
		echo "not ok - fuzz $target: $(grep -m 1 -E 'ERROR|SUMMARY' build-fuzz/"$target".log); see build-fuzz/$target.log"
		status=1
	fi
	rm -rf "$found"
done
exit $status
