#!/bin/bash
# podman5.sh: Debian 13's podman 5 on this Debian 12 machine, for running
# the core of the suite under it. As root. The podman runs in a trixie root
# of its own (debootstrap), entered through a private mount namespace and
# pivot_root: a plain chroot cannot make user namespaces, which rootless
# podman needs (see ../shared/HOST-NOTES.md, "Podman 5 on these machines").
#
#   podman5.sh start      build the root once (about 2 minutes), set up its
#                         account with ../setup.sh account, load the image
#                         into it (podman save | podman load, about 2
#                         minutes), stage and build this tree there
#   podman5.sh check      start, then the core of the suite as that account
#                         under podman 5: run, limits, attacks, signals and
#                         removal, MCP, files, the official image layouts,
#                         kernel memory
#   podman5.sh run CMD    CMD (a shell line) as the account inside the root
#   podman5.sh remove     delete the root (its storage goes with it)
#
# Nothing keeps running between calls: each one enters a mount namespace
# that ends with it, and ends the podman pause process it started. Environment: SAGE_SANDBOX_ACCOUNT, SAGE_SANDBOX_IMAGE as
# for setup.sh; SAGE_SANDBOX_TRIXIE_ROOT (default /var/tmp/sage-sandbox-trixie).
set -euo pipefail

account=${SAGE_SANDBOX_ACCOUNT:-sage-sandbox}
src=$(cd "$(dirname "$0")/.." && pwd)
# Sage 9.5's image, which the official layouts of 110-images.bats are made
# of, not sage-sandbox's default (Sage 10): the root needs it anyway, and
# one 3.6 GB copy is enough. The whole suite on Sage 10 runs on the host's
# podman 4 (.ci/run).
base_image=$("$src/tests/official-images.sh" base)
image=${SAGE_SANDBOX_IMAGE:-$base_image}
root=${SAGE_SANDBOX_TRIXIE_ROOT:-/var/tmp/sage-sandbox-trixie}
# The suite's core: everything that drives podman run, rm and ps, but the
# tests tagged any-podman, which prove what holds whichever podman started
# the container (the kernel's rlimits, which self-test sees passed, and
# sage-sandbox's own watchdogs); make check ran them.
core_tests="tests/020-run.bats tests/030-limits.bats tests/060-adversarial.bats
	tests/070-core.bats tests/090-mcp.bats tests/100-files.bats tests/110-images.bats
	tests/120-kernel-memory.bats"
# What the core tests use: a compiler and libraries to build, bats, python3
# (JSON checks), time (peak RSS), procps.
packages=podman,runc,uidmap,conmon,passt,make,gcc,libc6-dev,libjansson-dev,nettle-dev,pkg-config,scdoc,bats,python3,time,procps,util-linux,login,passwd,ca-certificates

say() { printf 'podman5: %s\n' "$*" >&2; }
die() { printf 'podman5: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run it as root: it builds and enters a root filesystem"

# enter COMMAND...: COMMAND as root with the trixie root as /, in a mount
# namespace of its own (the root's mount must be private for pivot_root).
enter() {
	unshare --mount --propagation private -- bash -euc '
		root=$1
		shift
		mount --rbind "$root" "$root"
		mount -t proc proc "$root/proc"
		mount --rbind /sys "$root/sys"
		mount --rbind /dev "$root/dev"
		mount -t tmpfs -o mode=755 tmpfs "$root/run"
		mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
		mount --make-rprivate /
		cd "$root"
		mkdir -p .oldroot
		pivot_root . .oldroot
		cd /
		umount -l /.oldroot
		mount --make-rshared /
		status=0
		"$@" || status=$?
		# Rootless podman leaves its pause process, which holds the
		# account'"'"'s namespaces, after its client exits: this call'"'"'s
		# (its pid file is in this namespace'"'"'s own /run, or in its /tmp
		# where podman ran without XDG_RUNTIME_DIR, as setup.sh account
		# runs it: storage-run-UID for podman 5, podman-run-UID before)
		# goes with it.
		# Its name: podman'"'"'s own, or catatonit where that is installed.
		for file in /run/user/*/libpod/tmp/pause.pid /tmp/storage-run-*/libpod/tmp/pause.pid \
			/tmp/podman-run-*/libpod/tmp/pause.pid; do
			pid=$(cat "$file" 2>/dev/null) || continue
			case $(cat "/proc/$pid/comm" 2>/dev/null) in
			"podman pause" | catatonit) kill -KILL "$pid" 2>/dev/null || continue ;;
			*) continue ;;
			esac
			# Gone, or a zombie init reaps, before the call returns.
			for _ in $(seq 50); do
				state=$(awk "{ print \$3 }" "/proc/$pid/stat" 2>/dev/null) || break
				[ "$state" != Z ] || break
				sleep 0.1
			done
		done
		exit "$status"' enter "$root" "$@"
}

# as_account LINE: LINE in a login shell of the account inside the root,
# with a runtime directory of its own, as a login manager would make, and
# the image loaded into the root as SAGE_SANDBOX_IMAGE.
as_account() {
	enter bash -c 'uid=$(id -u "$1")
		mkdir -p "/run/user/$uid"
		chown "$1:" "/run/user/$uid"
		chmod 700 "/run/user/$uid"
		exec runuser -l "$1" -c "export XDG_RUNTIME_DIR=/run/user/$uid PODMAN_IGNORE_CGROUPSV1_WARNING=1 SAGE_SANDBOX_IMAGE=$3; $2"' as_account \
		"$account" "$1" "$image"
}

build_root() {
	# Built once, and again when the package list changes.
	[ "$(cat "$root/.sage-sandbox-ready" 2>/dev/null)" = "$packages" ] && return
	local mirror log=/var/tmp/sage-sandbox-trixie.log
	mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null ||
		true)
	[ -n "$mirror" ] || die "cannot find the apt mirror in /etc/apt/sources.list.d/debian.sources"
	command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install debootstrap"
	rm -rf --one-file-system "$root"
	say "building a Debian 13 root with podman 5 in $root from $mirror (about 2 minutes)"
	if ! debootstrap --variant=minbase --include="$packages" trixie "$root" "$mirror" \
		>"$log" 2>&1; then
		tail -n 20 "$log" >&2
		die "debootstrap failed (whole log in $log)"
	fi
	rm -f "$log"
	mkdir -p "$root/opt/sage-sandbox-setup"
	cp "$src/setup.sh" "$root/opt/sage-sandbox-setup/"
	SAGE_SANDBOX_ACCOUNT=$account enter /opt/sage-sandbox-setup/setup.sh account
	echo "$packages" >"$root/.sage-sandbox-ready"
}

# load_image: the image, and the official layouts' base, copied from the
# host account's storage.
load_image() {
	local each
	for each in $(printf '%s\n' "$image" "$base_image" | sort -u); do
		as_account "podman image exists $each" && continue
		say "copying $each into the root's podman storage (about 2 minutes)"
		runuser -l "$account" -c "podman save $each" | as_account "podman load --quiet" >/dev/null
	done
}

stage_tree() {
	local dest=$root/home/$account/sage-sandbox owner
	owner=$(awk -F: -v a="$account" '$1 == a { print $3 ":" $4 }' "$root/etc/passwd")
	rm -rf "$dest"
	mkdir -p "$dest"
	tar -C "$src" --exclude=./.git --exclude=./lmstudio/node_modules -c . | tar -C "$dest" -x
	chown -R "$owner" "$dest"
	as_account "cd sage-sandbox && make -s sage-sandbox"
}

start() {
	build_root
	load_image
	stage_tree
	local version rootless
	version=$(as_account "podman --version")
	rootless=$(as_account "podman info --format '{{.Host.Security.Rootless}}'")
	[[ $version == *" 5."* ]] || die "the root's podman is not podman 5: $version"
	[ "$rootless" = true ] || die "podman is not rootless for $account inside the root"
	say "up: $version, rootless, image $image"
}

# sandbox_leftovers: processes of the uids the root's runs take (060's
# sandbox_host_uids: the shared 1000 and 10000-59999, through the root's
# account's subordinate ids), which no run leaves once it has ended. Under
# podman 5 a run stopped while podman started it left its runc init
# (podman forgets such a container) until sage-sandbox killed what is left
# of its uid after the removal.
sandbox_leftovers() {
	local first
	first=$(awk -F: -v user="$account" '$1 == user { print $2; exit }' "$root/etc/subuid")
	[ -n "$first" ] || return 0
	ps -eo uid=,pid=,args= | awk -v s="$((first + 999))" -v l="$((first + 9999))" \
		-v h="$((first + 59998))" '$1 == s || ($1 >= l && $1 <= h)'
}

case ${1:-} in
start) start ;;
check)
	start
	say "the suite's core under $(as_account "podman --version")"
	# Containers of a killed earlier pass would fail the first test that
	# expects none left: cleanup removes them, as setup.sh does.
	as_account "cd sage-sandbox && ./sage-sandbox cleanup"
	status=0
	# A file at a time, each followed by a look for processes a run left
	# (060's teardown looks after each of its own tests): one found fails
	# the stage, named with the file, and is killed, so that it fails no
	# later file.
	for file in $core_tests; do
		as_account "cd sage-sandbox && bats --timing --filter-tags '!any-podman' $file" ||
			status=$?
		left=$(sandbox_leftovers)
		if [ -n "$left" ]; then
			say "processes of a sandbox uid left after $file:"
			printf '%s\n' "$left" >&2
			printf '%s\n' "$left" | awk '{ print $2 }' | xargs -r kill -KILL 2>/dev/null || true
			status=1
		fi
	done
	exit "$status"
	;;
run)
	shift
	as_account "$*"
	;;
remove)
	rm -rf --one-file-system "$root"
	;;
*)
	echo "usage: podman5.sh start|check|run CMD|remove" >&2
	exit 2
	;;
esac
