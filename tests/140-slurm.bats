#!/usr/bin/env bats
# A real single-node Slurm (munged, slurmctld, slurmd) runs the shipped
# examples/slurm-batch.sh as a job array of the account, each task a shard of
# one batch under rootless podman. tests/slurm.sh starts and stops the
# cluster; its daemons need root: setup.sh check installs Slurm and runs this
# file as root; as any other user, or where Slurm is not installed, the test
# is skipped.

load helpers

ACCOUNT=${SAGE_SANDBOX_ACCOUNT:-sage-sandbox}

# slurm_sh start|stop: tests/slurm.sh, its lines shown in the TAP output;
# its exit status. fd 3 is closed for it: a daemon that kept bats' output
# open would make bats wait for it.
slurm_sh() {
	local log=$BATS_FILE_TMPDIR/slurm-$1 status=0
	"$BATS_TEST_DIRNAME/slurm.sh" "$1" >"$log" 2>&1 3>&- || status=$?
	sed 's/^/# /' "$log" >&3
	return "$status"
}

setup_file() {
	[ "$(id -u)" -eq 0 ] || return 0
	export SLURM_CONF=${SAGE_SANDBOX_SLURM_DIR:-/var/tmp/sage-sandbox-slurm}/slurm.conf
	local status=0
	slurm_sh start || status=$?
	# 5: Slurm or munge is not installed; setup() skips, saying what is missing.
	if [ "$status" -eq 5 ]; then
		export SLURM_MISSING
		SLURM_MISSING=$(tail -n 1 "$BATS_FILE_TMPDIR/slurm-start")
		SLURM_MISSING=${SLURM_MISSING#slurm: }
		return 0
	fi
	return "$status"
}

teardown_file() {
	[ "$(id -u)" -eq 0 ] && [ -z "${SLURM_MISSING:-}" ] || return 0
	slurm_sh stop
}

setup() {
	[ "$(id -u)" -eq 0 ] || skip "needs root to start Slurm's daemons: run by ./setup.sh check as root"
	[ -z "${SLURM_MISSING:-}" ] || skip "$SLURM_MISSING"
}

teardown() { :; }

as_account() { runuser -l "$ACCOUNT" -c "$*"; }

@test "slurm - sbatch --array=0-3 of examples/slurm-batch.sh over 400 jobs: every id once, as a local batch gives them" {
	local home dir
	home=$(getent passwd "$ACCOUNT" | cut -d: -f6)
	dir=$home/slurm-test
	rm -rf "$dir"
	as_account "mkdir -p $dir"
	as_account "python3 -c '
import json
for i in range(400):
    print(json.dumps({\"id\": i, \"code\": \"print(factor(%d)); print(%d^3 %% 97)\" % (2**31 + i, i)}))' >$dir/jobs.jsonl"
	# The tasks run as the account under rootless podman, with the
	# account's login environment (no XDG_RUNTIME_DIR), the build under
	# test and the suite's image.
	run as_account "cd $dir && SLURM_CONF=$SLURM_CONF SAGE_SANDBOX_IMAGE=$IMAGE SAGE_SANDBOX=$(cd "$BATS_TEST_DIRNAME/.." && pwd)/sage-sandbox \
		timeout 1200 sbatch --wait --array=0-3 --output=$dir/slurm-%A_%a.out \
		$(cd "$BATS_TEST_DIRNAME/.." && pwd)/examples/slurm-batch.sh $dir/jobs.jsonl $dir/results"
	echo "# $output" >&3
	cat "$dir"/slurm-*.out | sed 's/^/# task: /' >&3
	[ "$status" -eq 0 ]
	[ "$(ls "$dir/results" | wc -l)" -eq 4 ]
	as_account "cd $dir && cat results/results-*.jsonl >merged.jsonl"
	# The same file as one local batch.
	as_account "cd $dir && SAGE_SANDBOX_IMAGE=$IMAGE $(cd "$BATS_TEST_DIRNAME/.." && pwd)/sage-sandbox batch jobs.jsonl >local.jsonl 2>local.err"
	python3 - "$dir" <<-'EOF'
	import json, sys
	dir = sys.argv[1]
	def load(name):
	    out = {}
	    for line in open("%s/%s" % (dir, name)):
	        j = json.loads(line)
	        assert j["id"] not in out, "%s holds id %s twice" % (name, j["id"])
	        out[j["id"]] = j
	    return out
	merged, local = load("merged.jsonl"), load("local.jsonl")
	assert sorted(merged) == list(range(400)), "merged ids: %d" % len(merged)
	assert sorted(local) == list(range(400))
	for i in range(400):
	    for key in ("stdout", "stderr", "exit_code"):
	        assert merged[i][key] == local[i][key], (i, key, merged[i][key], local[i][key])
	    assert merged[i]["exit_code"] == 0, merged[i]
	EOF
	# Merging checks itself: resuming the merged file runs nothing.
	run as_account "cd $dir && SAGE_SANDBOX_IMAGE=$IMAGE $(cd "$BATS_TEST_DIRNAME/.." && pwd)/sage-sandbox batch --resume merged.jsonl jobs.jsonl 2>/dev/null"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	rm -rf "$dir"
}
