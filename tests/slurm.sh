#!/bin/bash
# slurm.sh: a real one-node Slurm cluster on this machine (munged,
# slurmctld, slurmd), for tests/140-slurm.bats. As root: the daemons need it.
#
#   slurm.sh start    write a one-node slurm.conf, start munged, slurmctld and
#                     slurmd, wait (at most a minute) until the node is idle
#   slurm.sh stop     cancel the jobs left, stop the three daemons, remove
#                     what start made
#   slurm.sh status   say whether the cluster is up
#
# Everything start makes lives in one directory, SAGE_SANDBOX_SLURM_DIR
# (default /var/tmp/sage-sandbox-slurm): the configuration (client commands
# need SLURM_CONF=DIR/slurm.conf), Slurm's state and spool, the logs, and a
# munged of its own with its own key and socket, so that a munge or Slurm
# the machine runs already is neither used nor stopped. The ports are not
# Slurm's defaults either. No systemd, no cgroups (proctrack/linuxproc,
# task/none), no accounting. Both commands may be repeated: start leaves a
# cluster that is up as it is, and starts afresh over one that is half up.
# A start that fails leaves what it made, for a look; stop removes it.
#
# Exit status: 0 done (status: up); 1 a step failed, and the end of the
# daemon's log says why; 3 (status only) not up; 5 Slurm or munge is not
# installed, the last line says what is missing (./setup.sh check installs
# them). One line per step, on stderr.
set -euo pipefail

dir=${SAGE_SANDBOX_SLURM_DIR:-/var/tmp/sage-sandbox-slurm}
export SLURM_CONF=$dir/slurm.conf
munge_dir=$dir/munge
socket=$munge_dir/munge.socket.2
ctld_port=16817
slurmd_port=16818
# Seconds to wait: for a daemon's pid file, for slurmctld to answer, for the
# node to be idle, for cancelled jobs to end, for a daemon to exit on SIGTERM.
pid_wait=10
ctld_wait=30
idle_wait=60
jobs_wait=30
exit_wait=10

say() { printf 'slurm: %s\n' "$*" >&2; }
die() { printf 'slurm: error: %s\n' "$*" >&2; exit 1; }

# fail WHAT LOG...: the end of each LOG that has anything, then WHAT failed.
fail() {
	local what=$1 log
	shift
	for log; do
		[ -s "$log" ] || continue
		say "the end of $log:"
		tail -n 15 "$log" | sed 's/^/slurm:   /' >&2
	done
	die "$what"
}

[ "$(id -u)" -eq 0 ] || die "run it as root: Slurm's daemons need it"

check_installed() {
	local command missing=()
	for command in munged mungekey munge unmunge slurmctld slurmd sbatch sinfo squeue scancel \
		scontrol; do
		command -v "$command" >/dev/null || missing+=("$command")
	done
	getent passwd munge >/dev/null || missing+=("munge account")
	[ ${#missing[@]} -eq 0 ] && return
	local list
	list=$(printf '%s, ' "${missing[@]}")
	printf 'slurm: Slurm or munge is not installed: no %s (%s)\n' "${list%, }" \
		"./setup.sh check installs slurmctld, slurmd, slurm-client and munge" >&2
	exit 5
}

host=$(hostname -s)

pid_file() {
	case $1 in
	munged) echo "$munge_dir/munged.pid" ;;
	*) echo "$dir/$1.pid" ;;
	esac
}

# running NAME: prints the pid in NAME's pid file if that process is alive
# and is NAME (a pid file can outlive its process, and the pid be reused).
# A zombie is not alive: an init that reaps late leaves a daemon's for a while.
running() {
	local pid stat
	pid=$(cat "$(pid_file "$1")" 2>/dev/null) || return 1
	[[ $pid =~ ^[0-9]+$ ]] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ] || return 1
	stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[ "${stat%% *}" != Z ] || return 1
	echo "$pid"
}

# gone NAME: NAME's pid file names no live process for a whole second. One
# look is not enough: a pid file is seen empty while it is written, and a
# daemon may write it anew as it starts (1 start in 5 failed on one look).
gone() {
	local i
	for ((i = 0; i < 10; i++)); do
		running "$1" >/dev/null && return 1
		sleep 0.1
	done
	return 0
}

# started NAME LOG...: waits (at most pid_wait seconds) for NAME's pid file
# and its live process: slurmctld and slurmd return before their daemon has
# written it, and a daemon that ends at once (a port in use) writes none.
started() {
	local name=$1 i
	shift
	for ((i = 0; i < pid_wait * 10; i++)); do
		running "$name" >/dev/null && return
		[ ! -e "$(pid_file "$name")" ] || ! gone "$name" || fail "$name exited" "$@"
		sleep 0.1
	done
	fail "$name wrote no pid file in ${pid_wait}s" "$@"
}

node_state() { sinfo -h -n "$host" -o %t 2>/dev/null; }

# up: whether the three daemons run and the node answers; sets state (the
# node's) or why (not).
state=''
why=''
up() {
	running munged >/dev/null || { why="munged is not running"; return 1; }
	running slurmctld >/dev/null || { why="slurmctld is not running"; return 1; }
	running slurmd >/dev/null || { why="slurmd is not running"; return 1; }
	state=$(node_state) || true
	case $state in
	idle | mix | alloc | comp) ;;
	*) why="node $host is ${state:-unknown to slurmctld}"; return 1 ;;
	esac
}

write_conf() {
	# Made afresh, never reused: /var/tmp is everyone's, and a directory
	# someone else made there must not become root's daemons' state.
	mkdir -m 755 "$dir" || die "cannot create $dir"
	mkdir -m 755 "$dir/state" "$dir/spool"
	cat >"$dir/slurm.conf" <<-EOF
	# A one-node cluster for the test: no cgroups, no accounting, no systemd.
	ClusterName=sagesandbox
	SlurmctldHost=$host(127.0.0.1)
	AuthType=auth/munge
	AuthInfo=socket=$socket
	SlurmUser=root
	StateSaveLocation=$dir/state
	SlurmdSpoolDir=$dir/spool
	SlurmctldPidFile=$dir/slurmctld.pid
	SlurmdPidFile=$dir/slurmd.pid
	SlurmctldLogFile=$dir/slurmctld.log
	SlurmdLogFile=$dir/slurmd.log
	ProctrackType=proctrack/linuxproc
	TaskPlugin=task/none
	JobAcctGatherType=jobacct_gather/none
	AccountingStorageType=accounting_storage/none
	SelectType=select/cons_tres
	SelectTypeParameters=CR_Core
	ReturnToService=2
	MpiDefault=none
	# No mail is sent; without this slurmctld logs an error (no /bin/mail)
	# that would head the log tail of any failure.
	MailProg=/bin/true
	SlurmctldPort=$ctld_port
	SlurmdPort=$slurmd_port
	NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
	PartitionName=sandbox Nodes=ALL Default=YES MaxTime=INFINITE State=UP
	EOF
	chmod 644 "$dir/slurm.conf"
	say "wrote $dir/slurm.conf (node $host, $(nproc) CPUs, ports $ctld_port and $slurmd_port)"
}

# munged as the munge account, as Debian runs it, with a key of its own; its
# socket's directory is open to every user, since sbatch runs as the account.
start_munged() {
	local log=$munge_dir/munged.log err=$munge_dir/munged.err
	mkdir -m 755 "$munge_dir"
	chown munge: "$munge_dir"
	runuser -u munge -- mungekey --create --keyfile="$munge_dir/munge.key" </dev/null \
		>>"$err" 2>&1 || fail "mungekey could not make munge's key" "$err"
	runuser -u munge -- munged --socket="$socket" --key-file="$munge_dir/munge.key" \
		--pid-file="$munge_dir/munged.pid" --log-file="$log" \
		--seed-file="$munge_dir/munged.seed" </dev/null >>"$err" 2>&1 ||
		fail "munged did not start" "$log" "$err"
	started munged "$log" "$err"
	# munged returns once it serves: a credential must go through now.
	munge -n -S "$socket" 2>>"$err" | unmunge -S "$socket" >/dev/null 2>>"$err" ||
		fail "munged does not answer on $socket" "$log" "$err"
	say "munged up (pid $(running munged), socket $socket)"
}

start_slurmctld() {
	local log=$dir/slurmctld.log err=$dir/slurmctld.err i
	slurmctld -i </dev/null >>"$err" 2>&1 || fail "slurmctld did not start" "$log" "$err"
	started slurmctld "$log" "$err"
	for ((i = 0; i < ctld_wait; i++)); do
		scontrol ping 2>/dev/null | grep -q 'is UP' && break
		! gone slurmctld || fail "slurmctld exited" "$log" "$err"
		sleep 1
	done
	[ "$i" -lt "$ctld_wait" ] || fail "slurmctld did not answer in ${ctld_wait}s" "$log" "$err"
	say "slurmctld up (pid $(running slurmctld), port $ctld_port)"
}

start_slurmd() {
	local log=$dir/slurmd.log err=$dir/slurmd.err i
	slurmd </dev/null >>"$err" 2>&1 || fail "slurmd did not start" "$log" "$err"
	started slurmd "$log" "$err"
	for ((i = 0; i < idle_wait; i++)); do
		[ "$(node_state)" = idle ] && break
		! gone slurmd || fail "slurmd exited" "$log" "$err"
		! gone slurmctld || fail "slurmctld exited" "$dir/slurmctld.log" "$dir/slurmctld.err"
		sleep 1
	done
	if [ "$i" -ge "$idle_wait" ]; then
		local reason
		reason=$(sinfo -h -R -o %E 2>&1) || true
		fail "node $host is not idle after ${idle_wait}s but $(node_state)${reason:+ ($reason)}" \
			"$dir/slurmctld.log" "$log" "$err"
	fi
	say "slurmd up (pid $(running slurmd), port $slurmd_port)"
}

start() {
	check_installed
	if up; then
		say "already up: node $host $state, SLURM_CONF=$SLURM_CONF"
		return
	fi
	if [ -e "$dir" ] || [ -L "$dir" ]; then
		say "not up ($why): stopping what there is first"
		stop
	fi
	write_conf
	start_munged
	start_slurmctld
	start_slurmd
	say "up: node $host idle, SLURM_CONF=$SLURM_CONF"
}

# stop_daemon NAME: SIGTERM, then SIGKILL if it is still there after
# exit_wait seconds.
stop_daemon() {
	local name=$1 pid i
	pid=$(running "$name") || { say "$name is not running"; return 0; }
	kill "$pid" 2>/dev/null || true
	for ((i = 0; i < exit_wait * 10; i++)); do
		running "$name" >/dev/null || { say "$name stopped (pid $pid)"; return 0; }
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	sleep 1
	! running "$name" >/dev/null || die "$name (pid $pid) outlived SIGKILL"
	say "$name killed (pid $pid): still there ${exit_wait}s after SIGTERM"
}

stop() {
	if [ ! -e "$dir" ] && [ ! -L "$dir" ]; then
		say "not started: no $dir"
		return
	fi
	local left=0 i
	# A job still running (a test that timed out) would outlive slurmd.
	if running slurmctld >/dev/null && [ -n "$(squeue -h -o %A 2>/dev/null)" ]; then
		scancel --partition=sandbox 2>/dev/null || true
		for ((i = 0; i < jobs_wait; i++)); do
			left=$(squeue -h -o %A 2>/dev/null | wc -l)
			[ "$left" -eq 0 ] && break
			sleep 1
		done
		if [ "$left" -eq 0 ]; then
			say "cancelled the jobs left"
		else
			say "$left jobs still there ${jobs_wait}s after scancel"
		fi
	fi
	stop_daemon slurmd
	stop_daemon slurmctld
	stop_daemon munged
	rm -rf --one-file-system "$dir"
	say "removed $dir"
	[ "$left" -eq 0 ] ||
		die "$left jobs did not end: their processes may live on (ps -C slurmstepd)"
}

status() {
	check_installed
	if up; then
		say "up: node $host $state (munged $(running munged)," \
			"slurmctld $(running slurmctld), slurmd $(running slurmd)), SLURM_CONF=$SLURM_CONF"
		return 0
	fi
	say "down: $why"
	return 3
}

case ${1:-} in
start) start ;;
stop) stop ;;
status) status ;;
*)
	echo "usage: slurm.sh start|stop|status" >&2
	exit 2
	;;
esac
