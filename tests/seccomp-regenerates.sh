#!/bin/sh
# seccomp-regenerates.sh: seccomp.json is what derive-seccomp.py makes of
# the podman profile it was derived from, byte for byte: a rule edited by
# hand in seccomp.json, or a change to the script not carried into the
# profile, fails here. Needs the podman package's profile; without it this
# says so and skips (it is a TAP skip, never a pass).
set -eu
cd "$(dirname "$0")/.."
source=${SECCOMP_SOURCE:-/usr/share/containers/seccomp.json}
echo "1..1"
if [ ! -r "$source" ]; then
	echo "ok 1 - seccomp.json regenerates # skip no $source (podman's package is not installed)"
	exit 0
fi
want=$(sed -n 's/^SOURCE_SHA256 = "\(.*\)"$/\1/p' derive-seccomp.py)
if [ "$(sha256sum <"$source" | cut -d' ' -f1)" != "$want" ]; then
	echo "ok 1 - seccomp.json regenerates # skip $source is another podman's profile than the one seccomp.json was derived from (sha256 $want)"
	exit 0
fi
if python3 derive-seccomp.py "$source" | cmp -s - seccomp.json; then
	echo "ok 1 - seccomp.json is derive-seccomp.py's output from $source"
else
	echo "not ok 1 - seccomp.json differs from derive-seccomp.py's output from $source"
	python3 derive-seccomp.py "$source" | diff seccomp.json - | head -n 20 | sed 's/^/# /'
	exit 1
fi
