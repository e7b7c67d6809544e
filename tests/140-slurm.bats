#!/usr/bin/env bats
# A real single-node Slurm (munged, slurmctld, slurmd) runs the shipped
# examples/slurm-batch.sh as a job array of the account, each task a shard of
# one batch under rootless podman. The daemons need root: setup.sh check runs
# this file as root; as any other user it is skipped.

load helpers

ACCOUNT=${SAGE_SANDBOX_ACCOUNT:-sage-sandbox}

setup_file() {
	[ "$(id -u)" -eq 0 ] || return 0
	export SLURM_DIR=/var/tmp/sage-sandbox-slurm
	if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null ||
		! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
			slurmctld slurmd slurm-client munge >"$BATS_FILE_TMPDIR/apt.log" 2>&1 || true
	fi
	stop_slurm
	rm -rf "$SLURM_DIR"
	mkdir -p "$SLURM_DIR/state" "$SLURM_DIR/spool"
	chmod 755 "$SLURM_DIR"
	local host
	host=$(hostname -s)
	cat >"$SLURM_DIR/slurm.conf" <<-EOF
	# A one-node cluster for the test: no cgroups, no accounting, no systemd.
	ClusterName=sagesandbox
	SlurmctldHost=$host(127.0.0.1)
	AuthType=auth/munge
	SlurmUser=root
	StateSaveLocation=$SLURM_DIR/state
	SlurmdSpoolDir=$SLURM_DIR/spool
	SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
	SlurmdPidFile=$SLURM_DIR/slurmd.pid
	SlurmctldLogFile=$SLURM_DIR/slurmctld.log
	SlurmdLogFile=$SLURM_DIR/slurmd.log
	ProctrackType=proctrack/linuxproc
	TaskPlugin=task/none
	JobAcctGatherType=jobacct_gather/none
	AccountingStorageType=accounting_storage/none
	SelectType=select/cons_tres
	SelectTypeParameters=CR_Core
	ReturnToService=2
	MpiDefault=none
	SlurmctldPort=16817
	SlurmdPort=16818
	NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
	PartitionName=sandbox Nodes=ALL Default=YES MaxTime=INFINITE State=UP
	EOF
	chmod 644 "$SLURM_DIR/slurm.conf"
	export SLURM_CONF=$SLURM_DIR/slurm.conf
	mkdir -p /run/munge /var/log/munge /var/lib/munge
	chown munge: /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
	runuser -u munge -- /usr/sbin/munged 2>"$SLURM_DIR/munged.err" || true
	slurmctld -i 2>"$SLURM_DIR/slurmctld.err" || true
	slurmd 2>"$SLURM_DIR/slurmd.err" || true
	local i
	for ((i = 0; i < 60; i++)); do
		[ "$(sinfo -h -o %t 2>/dev/null)" = idle ] && break
		sleep 1
	done
}

stop_slurm() {
	local f
	for f in slurmd slurmctld; do
		[ ! -f "$SLURM_DIR/$f.pid" ] || kill "$(cat "$SLURM_DIR/$f.pid")" 2>/dev/null || true
	done
	pkill -x slurmd 2>/dev/null || true
	pkill -x slurmctld 2>/dev/null || true
	pkill -x munged 2>/dev/null || true
	sleep 1
	return 0
}

teardown_file() {
	[ "$(id -u)" -eq 0 ] || return 0
	stop_slurm
}

setup() {
	[ "$(id -u)" -eq 0 ] || skip "needs root to start Slurm's daemons: run by ./setup.sh check as root"
	command -v slurmctld >/dev/null && command -v munged >/dev/null ||
		skip "Slurm and munge could not be installed: $(tail -1 "$BATS_FILE_TMPDIR/apt.log" 2>/dev/null)"
	[ "$(sinfo -h -o %t 2>/dev/null)" = idle ] || {
		echo "# slurmctld: $(tail -3 "$SLURM_DIR/slurmctld.log" "$SLURM_DIR/slurmctld.err" 2>&1)" >&3
		echo "# slurmd: $(tail -3 "$SLURM_DIR/slurmd.log" "$SLURM_DIR/slurmd.err" 2>&1)" >&3
		return 1
	}
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
	# account's login environment (no XDG_RUNTIME_DIR) and the build
	# under test.
	run as_account "cd $dir && SLURM_CONF=$SLURM_CONF SAGE_SANDBOX=$(cd "$BATS_TEST_DIRNAME/.." && pwd)/sage-sandbox \
		timeout 1200 sbatch --wait --array=0-3 --output=$dir/slurm-%A_%a.out \
		$(cd "$BATS_TEST_DIRNAME/.." && pwd)/examples/slurm-batch.sh $dir/jobs.jsonl $dir/results"
	echo "# $output" >&3
	cat "$dir"/slurm-*.out | sed 's/^/# task: /' >&3
	[ "$status" -eq 0 ]
	[ "$(ls "$dir/results" | wc -l)" -eq 4 ]
	as_account "cd $dir && cat results/results-*.jsonl >merged.jsonl"
	# The same file as one local batch.
	as_account "cd $dir && $(cd "$BATS_TEST_DIRNAME/.." && pwd)/sage-sandbox batch jobs.jsonl >local.jsonl 2>local.err"
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
	run as_account "cd $dir && $(cd "$BATS_TEST_DIRNAME/.." && pwd)/sage-sandbox batch --resume merged.jsonl jobs.jsonl 2>/dev/null"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	rm -rf "$dir"
}
