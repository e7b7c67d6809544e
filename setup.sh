#!/bin/bash
# setup.sh: take a Debian 12 machine from nothing to a working sage-sandbox.
#
# As root it installs the packages, creates an unprivileged account with
# subordinate ids and a rootless podman configuration, builds the SageMath
# image once (from Debian's sagemath package: no registry but the apt mirror
# is needed), builds sage-sandbox as that account, and runs a command there:
#
#   ./setup.sh            set up, then run the seed example through the sandbox
#   ./setup.sh check      set up, then run the whole test suite
#   ./setup.sh image      set up and build the image only
#
# As an ordinary user with rootless podman already working it skips the root
# steps and builds and runs in place.
#
# Environment: SAGE_SANDBOX_ACCOUNT (default sage-sandbox), SAGE_SANDBOX_IMAGE
# (default localhost/sagemath-debian:bookworm), SAGE_SANDBOX_BUILD_DIR (where
# the image's root filesystem is assembled, default /var/tmp).
set -euo pipefail

account=${SAGE_SANDBOX_ACCOUNT:-sage-sandbox}
image=${SAGE_SANDBOX_IMAGE:-localhost/sagemath-debian:bookworm}
build_dir=${SAGE_SANDBOX_BUILD_DIR:-/var/tmp}
src=$(cd "$(dirname "$0")" && pwd)
action=${1:-example}

say() { printf 'setup: %s\n' "$*" >&2; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

case $action in
	example|check|image) ;;
	*) die "unknown action '$action'; use one of: example, check, image" ;;
esac

packages=(podman runc uidmap slirp4netns bats scdoc debootstrap make gcc libc6-dev
	pkg-config tar python3)

install_packages() {
	local missing=() p
	for p in "${packages[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
			missing+=("$p")
	done
	# The LM Studio plugin's tests need Node and npm; keep a newer Node that
	# is already there.
	command -v npm >/dev/null || missing+=(nodejs npm)
	[ ${#missing[@]} -eq 0 ] && return
	say "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	quietly /var/tmp/sage-sandbox-apt.log apt-get update -q
	quietly /var/tmp/sage-sandbox-apt.log apt-get install -y -q --no-install-recommends "${missing[@]}"
	rm -f /var/tmp/sage-sandbox-apt.log
}

# Rootless podman needs subordinate uid/gid ranges; useradd -m adds them when
# login.defs says so, but an account made otherwise may lack them.
add_subordinate_range() {
	local file=$1 next
	grep -q "^$account:" "$file" 2>/dev/null && return
	next=$(awk -F: 'BEGIN { m = 100000 } { e = $2 + $3; if (e > m) m = e } END { print m }' \
		"$file" 2>/dev/null || echo 100000)
	echo "$account:$next:65536" >>"$file"
}

as_account() { runuser -l "$account" -c "$*"; }

# quietly LOG COMMAND...: runs COMMAND with its output in LOG, shown only
# (the end of it) if it fails.
quietly() {
	local log=$1
	shift
	if ! "$@" >>"$log" 2>&1; then
		tail -n 40 "$log" >&2
		die "failed: $* (whole log in $log)"
	fi
}

create_account() {
	if ! id "$account" >/dev/null 2>&1; then
		say "creating account $account"
		useradd -m -s /bin/bash "$account"
	fi
	add_subordinate_range /etc/subuid
	add_subordinate_range /etc/subgid
	# The account's podman: runc, because crun refuses cgroups v1 "hybrid"
	# hosts; cgroupfs and file events, because there may be no systemd; and
	# native overlay storage, because the vfs fallback copies the whole 3.6 GB
	# image for every container. Written only when absent: never overwrite a
	# configuration somebody made by hand.
	local conf=/home/$account/.config/containers
	as_account "mkdir -p $conf"
	if [ ! -e "$conf/containers.conf" ]; then
		as_account "cat >$conf/containers.conf" <<-'EOF'
			[engine]
			runtime = "runc"
			cgroup_manager = "cgroupfs"
			events_logger = "file"
		EOF
	fi
	if [ ! -e "$conf/storage.conf" ]; then
		as_account "cat >$conf/storage.conf" <<-'EOF'
			[storage]
			driver = "overlay"
		EOF
	fi
	[ "$(as_account "podman info --format '{{.Host.Security.Rootless}}'" 2>/dev/null)" = true ] ||
		die "podman is not rootless for $account; see: runuser -l $account -c 'podman info'"
}

# The image: Debian's own sagemath in a minimal Debian root, imported by the
# account (so it lands in that account's rootless storage). Built once.
build_root=
remove_build_root() {
	[ -n "$build_root" ] || return 0
	umount "$build_root/proc" 2>/dev/null || true
	rm -rf --one-file-system "$build_root"
	build_root=
}

build_image() {
	if as_account "podman image exists $image"; then
		say "image $image is present"
		return
	fi
	local mirror
	mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null ||
		true)
	[ -n "$mirror" ] || mirror=$(awk '/^deb / { print $2; exit }' /etc/apt/sources.list)
	[ -n "$mirror" ] || die "cannot find the apt mirror in /etc/apt/sources.list*"
	build_root=$(mktemp -d "$build_dir/sage-sandbox-rootfs.XXXXXX")
	# Whatever happens, the 5 GB build root does not outlive this script.
	trap remove_build_root EXIT
	say "building $image in $build_root from $mirror (about 6 minutes)"
	local log=$build_dir/sage-sandbox-image.log
	quietly "$log" debootstrap --variant=minbase bookworm "$build_root" "$mirror"
	if [ -e /etc/apt/sources.list.d/debian.sources ]; then
		cp /etc/apt/sources.list.d/debian.sources "$build_root/etc/apt/sources.list.d/"
		: >"$build_root/etc/apt/sources.list"
	fi
	# Java's post-install script (jmol, a sagemath dependency) needs /proc.
	mount -t proc proc "$build_root/proc"
	quietly "$log" chroot "$build_root" /bin/sh -ec '
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -q
		apt-get install -y -q --no-install-recommends sagemath
		apt-get clean
		rm -rf /var/lib/apt/lists/*
		useradd -m -u 1000 -s /bin/bash sage
	'
	umount "$build_root/proc"
	tar -C "$build_root" --numeric-owner -c . |
		as_account "podman import --change 'USER sage' --change 'WORKDIR /tmp' - $image" >/dev/null
	remove_build_root
	trap - EXIT
	rm -f "$log"
	say "image $image built"
}

# The account cannot necessarily read the caller's tree (CI clones under
# /root), so it builds and tests a copy in its home.
stage_tree() {
	local dest=/home/$account/sage-sandbox
	rm -rf "$dest"
	as_account "mkdir -p $dest"
	tar -C "$src" --exclude=./.git --exclude=./lmstudio/node_modules -c . |
		as_account "tar -C $dest -x --no-same-owner"
	echo "$dest"
}

run_action() {
	local dir=$1 run=$2
	case $action in
		example) $run "cd $dir && make -s && ./sage-sandbox run examples/seed.sage" ;;
		check) $run "cd $dir && make -s && make -s check" ;;
		image) ;;
	esac
}

as_self() { bash -c "$*"; }

if [ "$(id -u)" -ne 0 ]; then
	podman image exists "$image" 2>/dev/null ||
		die "image $image not found; building it needs root: sudo $0 image"
	run_action "$src" as_self
	exit
fi

install_packages
create_account
build_image
[ "$action" = image ] && exit 0
dir=$(stage_tree)
if [ "$action" = check ]; then
	# As root, sage-sandbox must refuse to run (podman is not rootless here):
	# this part of the suite can only run as root.
	as_account "cd $dir && make -s"
	(cd "$dir" && bats tests/000-root.bats)
fi
run_action "$dir" as_account
