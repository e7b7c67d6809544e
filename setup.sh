#!/bin/bash
# setup.sh: take a Debian 12 or 13 machine from nothing to a working
# sage-sandbox (13 tried as a minimal trixie root on this machine kind).
#
# As root it installs the packages, creates an unprivileged account with
# subordinate ids and a rootless podman configuration, builds the SageMath
# image once, builds sage-sandbox as that account, and runs a command there.
# The image holds the newest Sage this machine can build: Sage 10 from
# passagemath's wheels (pinned) where the Python package index answers,
# sage-sandbox's default image; else Debian 12's Sage 9.5 from the apt mirror,
# which the account's settings file then names. One line says which and why.
#
#   ./setup.sh            set up, install sage-sandbox in /usr/local, run the
#                         seed example through the sandbox, say what to type next
#   ./setup.sh check      set up (with Slurm and munge too, for the suite's
#                         one-node cluster), then run the whole test suite
#   ./setup.sh image      set up and build the image only
#   ./setup.sh core       set up, then the suite's core only (make
#                         check-core; CI's --sage 9.5 after the suite on 10)
#   ./setup.sh account    the account and its rootless podman configuration
#                         only: no packages, no image (tests/podman5.sh
#                         uses it inside a Debian 13 root)
#   ./setup.sh image --for USER
#                         put the image in USER's own rootless storage (copied
#                         from the account's, or built), for a desktop user
#                         who runs sage-sandbox (or LM Studio) as themselves
#   ... --sage 10|9.5     any of them with that Sage, by name: 10 is
#                         localhost/sagemath-passagemath:VERSION, 9.5
#                         localhost/sagemath-debian:bookworm. Chosen by
#                         name for example or image, 9.5 is written in the
#                         settings file as the image; check and core name
#                         it to the tests alone. check builds 9.5's image
#                         too: its official-layout test images are made
#                         from it.
#
# As an ordinary user with rootless podman already working it skips the root
# steps and builds and runs in place, on the newest Sage image already in
# their storage; where there is none, `./setup.sh image` as that user gets
# one into it, with sudo for the root-only steps. The settings file written
# is always its owner's: the one sage-sandbox reads (SAGE_SANDBOX_SETTINGS,
# else under XDG_CONFIG_HOME or ~/.config).
#
# Environment: SAGE_SANDBOX_ACCOUNT (default sage-sandbox), SAGE_SANDBOX_SAGE
# (9.5 or 10, as --sage; default the newest that can be built),
# SAGE_SANDBOX_IMAGE (default the image of that Sage; without a Sage, one
# of the two names above), SAGE_SANDBOX_BUILD_DIR (where the image's root
# filesystem is assembled, default /var/tmp).
set -euo pipefail

# The passagemath release Sage 10's image is built from: one whose corpus
# (bench/corpus.jsonl), self-test and display tests pass here. (10.8.10
# and 10.8.11 compile Maxima's files at import, which needs a compiler the
# image does not have: solve and integrate fail.) Its image is
# sage-sandbox's default (settings.c; tests/unit-cli.sh holds them equal).
passagemath_version=10.8.13
sage10_image=localhost/sagemath-passagemath:$passagemath_version
sage95_image=localhost/sagemath-debian:bookworm

say() { printf 'setup: %s\n' "$*" >&2; }
die() {
	printf 'setup: error: %s\n' "$*" >&2
	# A second image's build, started beside the first, ends on its own
	# (and removes its root): killed, it would leave both behind.
	[ -z "${second_build:-}" ] || say "waiting for $sage95_image's build to end"
	wait_second_build || true
	exit 1
}
# The pid of the second image's build, while it runs in the background.
second_build=
wait_second_build() {
	local pid=$second_build
	second_build=
	[ -z "$pid" ] || wait "$pid"
}

account=${SAGE_SANDBOX_ACCOUNT:-sage-sandbox}
build_dir=${SAGE_SANDBOX_BUILD_DIR:-/var/tmp}
src=$(cd "$(dirname "$0")" && pwd)
action=example
case ${1:-} in
	''|--*) ;;
	*) action=$1; shift ;;
esac
for_user=
sage=${SAGE_SANDBOX_SAGE:-}
# Why this Sage: said once, and written beside a settings file's image.
sage_why=
[ -z "$sage" ] || sage_why="chosen with SAGE_SANDBOX_SAGE=$sage"
while [ $# -gt 0 ]; do
	case $1 in
		--for)
			[ "$action" = image ] || die "--for is for './setup.sh image --for USER' only"
			for_user=${2:?setup: --for needs a user name}
			shift 2 ;;
		--sage)
			sage=${2:?setup: --sage needs a version: 9.5 or 10}
			sage_why="chosen with --sage $sage"
			shift 2 ;;
		*) die "unknown argument '$1'; use: ./setup.sh [example|check|core|image|account] [--sage 9.5|10] [--for USER]" ;;
	esac
done

case $action in
	example|check|core|image|account) ;;
	*) die "unknown action '$action'; use one of: example, check, core, image, account" ;;
esac
case $sage in
	''|9.5|10) ;;
	*) die "unknown Sage '$sage'; use --sage 10 (passagemath's wheels) or --sage 9.5 (Debian's package)" ;;
esac
# image_of SAGE: the image that Sage's build is tagged with.
image_of() {
	case $1 in
		9.5) echo "${SAGE_SANDBOX_IMAGE:-$sage95_image}" ;;
		10) echo "${SAGE_SANDBOX_IMAGE:-$sage10_image}" ;;
	esac
}
image=
# Set where Sage 10 was chosen because the index answered: a build of it
# that fails then falls back to 9.5.
sage_by_index=
if [ -n "$sage" ]; then
	image=$(image_of "$sage")
elif [ -n "${SAGE_SANDBOX_IMAGE:-}" ]; then
	# An image named without a Sage: one of the two, whose Sage is known.
	case $SAGE_SANDBOX_IMAGE in
		"$sage10_image") sage=10 ;;
		"$sage95_image") sage=9.5 ;;
		*) die "SAGE_SANDBOX_IMAGE=$SAGE_SANDBOX_IMAGE: say which Sage to build it from with --sage 10 or --sage 9.5" ;;
	esac
	image=$SAGE_SANDBOX_IMAGE sage_why="named with SAGE_SANDBOX_IMAGE"
fi

# python3-venv: a pip for asking whether the Python package index answers.
packages=(podman runc uidmap slirp4netns bats scdoc debootstrap make gcc libc6-dev
	libjansson-dev nettle-dev pkg-config tar python3 python3-venv ca-certificates)
# For check only, not for a machine that just runs sage-sandbox: the
# suite's real one-node Slurm (tests/slurm.sh, for tests/140-slurm.bats),
# and clang with its sanitizer and libFuzzer runtimes (make fuzz).
# Those runtimes carry clang's version: Debian 12's clang is 14, Debian
# 13's 19; elsewhere the name of whichever is the default.
debian=$( (. /etc/os-release && echo "${VERSION_ID:-}") 2>/dev/null || true)
case $debian in
	12) clang_runtime=libclang-rt-14-dev ;;
	13) clang_runtime=libclang-rt-19-dev ;;
	*) clang_runtime=libclang-rt-dev ;;
esac
[ "$action" != check ] ||
	packages+=(slurmctld slurmd slurm-client munge clang "$clang_runtime")
# For the suite, whole or core: ps and pgrep (procps), GNU time's peak RSS,
# strace (a connection delayed by it, tests/160-serve.bats); a minimal
# Debian install has none of them (tried in a Debian 13 root).
case $action in check|core) packages+=(procps time strace) ;; esac

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


# as_user USER COMMAND: a login shell of USER (its XDG_RUNTIME_DIR and HOME).
# Debian 13's podman 5 warns at each command, twice, that cgroups v1 is
# deprecated: this machine kind has them, and the user can do nothing
# about it here (sage-sandbox's own podman commands log errors only).
as_user() {
	local user=$1
	shift
	PODMAN_IGNORE_CGROUPSV1_WARNING=1 runuser -l -w PODMAN_IGNORE_CGROUPSV1_WARNING "$user" -c "$*"
}
as_account() { as_user "$account" "$@"; }

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
	expect_rootless_podman "$account"
	delegate_cpu_group "$account"
}

# expect_rootless_podman USER: dies unless podman answers, rootless, for
# USER. A podman whose recorded state names processes that are all gone
# refuses every command: its pause process and a container's conmon were
# killed, or the machine restarted and kept /tmp (podman's runtime state
# lives in /tmp/podman-run-UID where there is no XDG_RUNTIME_DIR, so it
# never sees the restart). Podman names the repair, 'podman system
# migrate'; for the account, whose podman serves sage-sandbox alone,
# setup.sh makes it and says so. Another user is told.
expect_rootless_podman() {
	local user=$1 said answer
	said=$(mktemp)
	answer=$(as_user "$user" "podman info --format '{{.Host.Security.Rootless}}'" 2>"$said") || true
	if [ "$answer" != true ] && [ "$user" = "$account" ] &&
		grep -q 'podman system migrate' "$said"; then
		say "podman's state for $account names processes that are gone (killed, or a restart that kept /tmp): podman system migrate"
		as_user "$user" "podman system migrate" >>"$said" 2>&1 || true
		answer=$(as_user "$user" "podman info --format '{{.Host.Security.Rootless}}'" 2>>"$said") || true
	fi
	if [ "$answer" != true ]; then
		answer=$(grep -v 'level=warning' "$said" | tail -n 1) || true
		rm -f "$said"
		die "podman does not answer as rootless for $user${answer:+ ($answer)}; see: runuser -l $user -c 'podman info'"
	fi
	rm -f "$said"
}

# delegate_cpu_group USER: where cgroup v1 has the cpu controller, rootless
# podman applies no --cpus; root makes USER a cpu group of its own, in
# which sage-sandbox gives each container a group with --cpus as its quota
# (cpugroup.c), where the scheduler holds it by every route. Elsewhere
# sage-sandbox's throttle holds it (memwatch.c). cgroupfs forgets the group
# at a reboot: running setup again makes it again ('sage-sandbox status'
# says which holds --cpus).
delegate_cpu_group() {
	local user=$1 hierarchy group
	hierarchy=$(awk '{ split($0, side, " - "); split(side[2], f, " ")
		if (f[1] == "cgroup" && f[3] ~ /(^|,)cpu(,|$)/) { print $5; exit } }' /proc/self/mountinfo)
	[ -n "$hierarchy" ] || return 0
	group=$hierarchy/sage-sandbox-$(id -u "$user")
	if mkdir -p "$group" 2>/dev/null && chown "$user" "$group" && chmod 755 "$group"; then
		say "--cpus for $user: held by the cpu group $group"
	else
		say "--cpus for $user: no cpu group could be made in $hierarchy; sage-sandbox's throttle holds it"
	fi
}

# The image: Sage (Debian's sagemath, or passagemath's wheels) in a minimal
# Debian root, imported by the account (so it lands in that account's
# rootless storage). Built once.
build_root=
remove_build_root() {
	[ -n "$build_root" ] || return 0
	umount "$build_root/proc" 2>/dev/null || true
	rm -rf --one-file-system "$build_root"
	build_root=
}

# build_image [USER]: the image in USER's rootless storage (default: the
# account's). For another user it is copied from the account's storage when
# that has it (podman save | podman load, about 2 minutes), else built.
build_image() {
	local user=${1:-$account}
	if as_user "$user" "podman image exists $image"; then
		add_layers "$user"
		say "image $image is present for $user"
		return
	fi
	if [ "$user" != "$account" ] && as_account "podman image exists $image" 2>/dev/null; then
		say "copying $image from $account's storage to $user's"
		local log=$build_dir/sage-sandbox-image-copy.log
		as_account "podman save $image" 2>>"$log" | as_user "$user" "podman load" >>"$log" 2>&1 ||
			{ tail -n 20 "$log" >&2; die "copying the image to $user failed (log: $log)"; }
		rm -f "$log"
		add_layers "$user"
		say "image $image is present for $user"
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
	local log=$build_dir/sage-sandbox-image-$sage.log
	case $sage in
		9.5) say "building $image (Sage 9.5) in $build_root from $mirror (about 5 minutes)" ;;
		10) say "building $image (Sage 10, passagemath $passagemath_version) in $build_root" \
			"from $mirror and the Python package index (about 5 minutes)" ;;
	esac
	quietly "$log" debootstrap --variant=minbase bookworm "$build_root" "$mirror"
	# The host's own sources where it is bookworm too (its updates and
	# security suites); a Debian 13 host's name trixie, whose packages are
	# not the image's: there, debootstrap's bookworm line stays.
	if [ "$debian" = 12 ] && [ -e /etc/apt/sources.list.d/debian.sources ]; then
		cp /etc/apt/sources.list.d/debian.sources "$build_root/etc/apt/sources.list.d/"
		: >"$build_root/etc/apt/sources.list"
	fi
	# Java's post-install script (jmol, a sagemath dependency) needs /proc.
	mount -t proc proc "$build_root/proc"
	case $sage in
		9.5) install_debian_sage ;;
		10) install_passagemath ;;
	esac
	quietly "$log" chroot "$build_root" /bin/sh -ec '
		apt-get clean
		rm -rf /var/lib/apt/lists/*
		useradd -m -u 1000 -s /bin/bash sage
	'
	umount "$build_root/proc"
	tar -C "$build_root" --numeric-owner -c . |
		as_user "$user" "podman import --quiet --change 'USER sage' --change 'WORKDIR /tmp' - $image" >/dev/null
	remove_build_root
	trap - EXIT
	add_layers "$user"
	rm -f "$log"
	say "image $image built for $user"
}

# add_gap_workspace USER PYTHON: GAP's saved workspace in USER's $image,
# where it has none and the image is one setup.sh makes. Sage's libgap, started
# once in a build over the image (as root, in the sandbox's HOME and
# DOT_SAGE, which are then removed), saves the workspace it saves at a
# first start, which is kept as
# /usr/local/share/sage-sandbox/libgap-workspace-HASH, HASH Sage's own for
# that GAP (its root paths, version and architecture on Sage 10, libgap's
# path on 9.5), in a layer over the image, labelled. The launcher starts
# GAP from it (launcher/gapspace.py): 0.15 s on Sage 10, where a fresh
# container's Sage read GAP's library (1.3 s) and saved its own into /tmp
# (57 MB; 9.5's, 49 MB). An image made before gets its layer at the next
# ./setup.sh run as root (about 5 s). A podman build: podman 4.3's commit
# fails rootless ("runroot must be set"). It only saves time: where it
# fails, setup says so and goes on, and GAP starts as a fresh Sage's does.
add_gap_workspace() {
	local user=$1 python=$2 context label=sage-sandbox.gap-workspace
	[ "$(as_user "$user" "podman image inspect --format '{{index .Labels \"$label\"}}' $image" \
		2>/dev/null)" != 1 ] || return 0
	context=$(mktemp -d "$build_dir/sage-sandbox-gap-workspace.XXXXXX")
	cat >"$context/gap-workspace.py" <<-'EOF'
		import os, shutil
		os.makedirs(os.environ["HOME"])
		from sage.all import libgap
		from sage.libs.gap.saved_workspace import workspace
		libgap.eval("1")
		path, current = workspace()
		assert current, "libgap saved no workspace"
		os.makedirs("/usr/local/share/sage-sandbox", exist_ok=True)
		os.chmod("/usr/local/share/sage-sandbox", 0o755)
		kept = "/usr/local/share/sage-sandbox/libgap-workspace-" + path.rsplit("-", 1)[1]
		shutil.copy2(path, kept)
		os.chmod(kept, 0o644)
	EOF
	# The script is mounted where the sandbox's /tmp (a tmpfs) hides what
	# the mount leaves; no byte code is written (Sage's timestamp() reads
	# the times of libgap's directory, __pycache__ too).
	cat >"$context/Containerfile" <<-EOF
		FROM $image
		USER root
		RUN --mount=type=bind,source=gap-workspace.py,target=/tmp/gap-workspace.py env HOME=/tmp/sage-home DOT_SAGE=/tmp/dot-sage TMPDIR=/tmp/gap-workspace-tmp PYTHONDONTWRITEBYTECODE=1 sh -c 'mkdir /tmp/gap-workspace-tmp && $python /tmp/gap-workspace.py; status=\$?; rm -rf /tmp/sage-home /tmp/dot-sage /tmp/gap-workspace-tmp; exit \$status'
		LABEL $label=1
		USER sage
	EOF
	build_layer gap-workspace "$user" "$context" "GAP's saved workspace" "GAP starts as in a fresh Sage"
}

# add_first_use_files USER PYTHON: what the warm-up's steps (launcher/warm.py:
# Maxima's start, GAP's, a plot, Singular, scipy, the package systems)
# leave in Sage's HOME and DOT_SAGE, kept in a layer over USER's $image as
# /usr/local/share/sage-sandbox/first-use/, which the launcher copies into
# every container's /tmp once Sage is imported (launcher/firstuse.py):
# Maxima's binary directory and its directory cache's test, GAP's history
# and its workspace's link, matplotlib's font list (built in every cold
# call that plotted), the R Makevars file sage-env writes, on 9.5
# fontconfig's cache and GAP's ~/.gap.
# A warm container's Sage has used them, a cold one's had not: with these
# in both, a call's listing of HOME or DOT_SAGE, and the threads matplotlib
# starts to build its font list, are the same cold and warm. Not kept:
# Sage's per-process temporary directories (DOT_SAGE/temp) and files over 1
# MB (a workspace GAP saved itself). The layer is labelled with a hash of
# the script, the steps, its build and the GAP workspace layer's label, and
# made again when they change, over the last. Where it fails, setup says so
# and goes on: the files are an earlier build's where there was one, else
# there are none and HOME and DOT_SAGE start empty, as in a fresh Sage. It
# fails rather than keep an entry the sandbox's user could not read (the
# image's files are root's) or more than 1 MiB or 512 entries.
add_first_use_files() {
	local user=$1 python=$2 context recipe label=sage-sandbox.first-use
	context=$(mktemp -d "$build_dir/sage-sandbox-first-use.XXXXXX")
	# The warm-up's own steps (launcher/warm.py) and its GAP workspace link
	# (launcher/gapspace.py): what they leave is what a warm container's
	# calls find.
	mkdir "$context/launcher"
	cp "$src"/launcher/*.py "$context/launcher/"
	cat >"$context/first-use.py" <<-'EOF'
		import os, shutil, stat, sys
		places = ("sage-home", "dot-sage")
		kept = sys.argv[1]
		os.makedirs(kept)
		# What a container that serves several calls records of /tmp and
		# writes again after each (launcher/tmpreset.py) is bounded (4 MiB,
		# 4096 entries): these stay well below it.
		MOST_BYTES, MOST_ENTRIES = 1 << 20, 512

		def entries():
		    found = set()
		    for place in places:
		        for root, dirs, files in os.walk(os.path.join("/tmp", place)):
		            for name in dirs + files:
		                found.add(os.path.relpath(os.path.join(root, name), "/tmp"))
		    return found

		for place in places:
		    os.makedirs(os.path.join("/tmp", place), mode=0o700)
		import sage.all  # noqa: F401
		imported = entries()
		from launcher import gapspace, warm
		gapspace.install()
		for name, step in warm.STEPS:
		    if name == "maxima":  # started by the warm-up's record of its counters
		        from sage.interfaces.maxima_lib import maxima_lib
		        maxima_lib.eval("1")
		    step()
		# Maxima's test of its directory cache (mload.lisp), made at a
		# process's first file search where MAXIMA_USERDIR is over 3 s old,
		# its result stored there: made here, so that no call makes it, cold
		# or warm, at a moment its own speed decides.
		import time
		from sage.interfaces.maxima_lib import maxima_lib
		past = time.time() - 60
		for directory in (os.environ["MAXIMA_USERDIR"], os.environ["DOT_SAGE"]):
		    os.utime(directory, (past, past))
		maxima_lib.eval('file_search("sandbox_no_such_file")')
		# A name holding the host's name (Sage 10's workspace link) is kept
		# with a mark in its place, for the container's own (firstuse.py).
		from sage.env import HOSTNAME
		total = count = 0
		for path in sorted(entries() - imported):
		    if path.startswith("dot-sage/temp/") or path == "dot-sage/temp":
		        continue  # Sage's per-process temporary directories
		    parts = path.split("/")
		    for depth in range(2, len(parts) + 1):
		        here = "/".join(parts[:depth])
		        source = os.path.join("/tmp", here)
		        copy = os.path.join(kept, here.replace(HOSTNAME, "@HOSTNAME@") if HOSTNAME else here)
		        st = os.lstat(source)
		        if os.path.lexists(copy):
		            continue
		        # The image's files are root's, the sandbox's user another:
		        # an entry that user could not read would not be kept as it
		        # is.
		        mode = stat.S_IMODE(st.st_mode)
		        readable = 0o005 if stat.S_ISDIR(st.st_mode) else 0o004
		        if not stat.S_ISLNK(st.st_mode) and mode & readable != readable:
		            sys.exit("%s has mode %o, which the sandbox's user could not read" % (here, mode))
		        count += 1
		        os.makedirs(os.path.dirname(copy), exist_ok=True)
		        if stat.S_ISDIR(st.st_mode):
		            os.mkdir(copy)
		            os.chmod(copy, mode)
		        elif stat.S_ISLNK(st.st_mode):
		            os.symlink(os.readlink(source), copy)
		        elif stat.S_ISREG(st.st_mode) and st.st_size <= 1 << 20:
		            shutil.copyfile(source, copy)
		            os.chmod(copy, mode)
		            total += st.st_size
		        if total > MOST_BYTES or count > MOST_ENTRIES:
		            sys.exit("more than %d bytes or %d entries" % (MOST_BYTES, MOST_ENTRIES))
	EOF
	# Run as the image's user, in the sandbox's HOME, DOT_SAGE,
	# MPLCONFIGDIR, MAXIMA_USERDIR, locale and thread settings (podman.c):
	# as root, fontconfig would write its cache into the image's /var/cache,
	# and Maxima and matplotlib would look elsewhere without MAXIMA_USERDIR
	# and MPLCONFIGDIR.
	cat >"$context/Containerfile" <<-EOF
		FROM $image
		USER root
		RUN --mount=type=bind,source=.,target=/tmp/first-use-src sh -c 'rm -rf /tmp/first-use /tmp/sage-home /tmp/dot-sage /usr/local/share/sage-sandbox/first-use && mkdir -m 0700 /tmp/first-use && chown sage /tmp/first-use && runuser -u sage -- env HOME=/tmp/sage-home DOT_SAGE=/tmp/dot-sage MPLCONFIGDIR=/tmp/dot-sage/matplotlib MAXIMA_USERDIR=/tmp/dot-sage/maxima TMPDIR=/tmp/first-use SAGE_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=/tmp/first-use-src LC_CTYPE=C.UTF-8 $python /tmp/first-use-src/first-use.py /tmp/first-use/kept && mkdir -p /usr/local/share/sage-sandbox && cp -R --preserve=mode /tmp/first-use/kept /usr/local/share/sage-sandbox/first-use && chown -R -h root:root /usr/local/share/sage-sandbox/first-use; status=\$?; rm -rf /tmp/first-use /tmp/sage-home /tmp/dot-sage; exit \$status'
	EOF
	# Made again where the steps, this script or its build changed, or
	# the GAP workspace layer came since (the link to it is among them).
	recipe=$({ cat "$context/first-use.py" "$context/launcher/warm.py" \
		"$context/launcher/gapspace.py" "$context/Containerfile"
		as_user "$user" "podman image inspect --format \
			'{{index .Labels \"sage-sandbox.gap-workspace\"}}' $image" 2>/dev/null
	} | sha256sum | cut -c1-16)
	if [ "$(as_user "$user" "podman image inspect --format '{{index .Labels \"$label\"}}' $image" \
		2>/dev/null)" = "$recipe" ]; then
		rm -rf "$context"
		return 0
	fi
	printf 'LABEL %s=%s\nUSER sage\n' "$label" "$recipe" >>"$context/Containerfile"
	build_layer first-use "$user" "$context" "the files of Sage's first use" \
		"the image's first-use files, if any, are from an earlier build"
}

# build_layer NAME USER CONTEXT WHAT OTHERWISE: the Containerfile in CONTEXT
# built over USER's $image, and CONTEXT removed; where it fails, setup says
# so (WHAT could not be added; OTHERWISE), keeps the log, and goes on.
build_layer() {
	local name=$1 user=$2 context=$3 what=$4 otherwise=$5
	local log=$build_dir/sage-sandbox-$name-$sage-$user.log
	chmod -R a+rX "$context"
	if as_user "$user" "podman build --quiet --layers=false --network none --tag $image $context" \
		>"$log" 2>&1; then
		rm -f "$log"
		say "image $image: $what added for $user"
	else
		say "image $image: $what could not be added for $user (log: $log); $otherwise"
	fi
	rm -rf "$context"
}

# add_layers USER: the layers setup.sh adds over USER's $image, each where
# it is missing (an image built before gets it at the next run as root),
# given Sage's Python in the image.
add_layers() {
	local python
	case $image in
		"$sage10_image" | "$sage95_image") ;;
		*) return 0 ;; # an image named with SAGE_SANDBOX_IMAGE is the user's own
	esac
	case $sage in
		9.5) python=/usr/bin/python3 ;;
		10) python=/opt/sage/bin/python ;;
		*) return 0 ;;
	esac
	add_gap_workspace "$1" "$python"
	add_first_use_files "$1" "$python"
}

# build_or_fall_back: the account's image; where Sage 10 was chosen because
# the package index answered and its build fails all the same, Sage 9.5's.
build_or_fall_back() {
	local status=0
	if [ -z "$sage_by_index" ]; then
		build_image
		return
	fi
	set +e
	(set -e && second_build= && build_image)
	status=$?
	set -e
	[ "$status" -ne 0 ] || return 0
	# Not two builds of one image at once: 9.5's beside it may be one.
	wait_second_build || true
	sage=9.5 image=$(image_of 9.5) sage_by_index=
	sage_why="Sage 10's build failed (above); Sage 9.5 comes from the apt mirror"
	say "Sage $sage, $image: $sage_why"
	build_image
}

# Sage 9.5: Debian 12's sagemath package, and what it depends on.
install_debian_sage() {
	quietly "$log" chroot "$build_root" /bin/sh -ec '
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -q
		apt-get install -y -q --no-install-recommends sagemath
	'
}

# Sage 10: passagemath's wheels (binary only: the image has no compiler)
# in a venv of Debian's Python 3.11, under /opt/sage; its `sage` on PATH,
# whose `sage -python` is that venv's Python (IMAGES in sage-sandbox(1)).
# pip runs with the host's trust (a copy of its CA bundle, removed after)
# and proxy settings, and nothing else of root's environment.
install_passagemath() {
	quietly "$log" chroot "$build_root" /bin/sh -ec '
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -q
		apt-get install -y -q --no-install-recommends python3 python3-venv libstdc++6 libgomp1
		python3 -m venv /opt/sage
	'
	cp /etc/resolv.conf "$build_root/etc/resolv.conf"
	cp /etc/ssl/certs/ca-certificates.crt "$build_root/tmp/host-ca.crt"
	local proxies
	mapfile -t proxies < <(proxy_settings)
	quietly "$log" chroot "$build_root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root \
		"${proxies[@]}" PIP_CERT=/tmp/host-ca.crt REQUESTS_CA_BUNDLE=/tmp/host-ca.crt \
		/opt/sage/bin/pip install -q --no-cache-dir --only-binary=:all: \
		"passagemath-standard==$passagemath_version"
	rm -f "$build_root/tmp/host-ca.crt"
	: >"$build_root/etc/resolv.conf"
	ln -s /opt/sage/bin/sage "$build_root/usr/local/bin/sage"
}

# proxy_settings: the host's proxy variables, a NAME=VALUE line each: all
# of root's environment that pip is given.
proxy_settings() {
	local v
	for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
		[ -z "${!v:-}" ] || printf '%s=%s\n' "$v" "${!v}"
	done
}

# index_answers: whether pip fetches passagemath's pinned package (that one
# file, no dependencies, for the image's Python 3.11) as the image's build
# would: Debian's Python in a throwaway venv, the host's proxies and trust,
# no pip configuration. Sets index_error to what pip said when it does not.
index_answers() {
	local dir status=0 proxies
	mapfile -t proxies < <(proxy_settings)
	dir=$(mktemp -d "$build_dir/sage-sandbox-index.XXXXXX") ||
		{ index_error="no directory for pip in $build_dir"; return 1; }
	{
		/usr/bin/python3 -m venv "$dir/venv" &&
			timeout 150 /usr/bin/env -i PATH=/usr/bin:/bin HOME="$dir" "${proxies[@]}" \
				PIP_CONFIG_FILE=/dev/null PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
				"$dir/venv/bin/pip" download -q --no-deps --only-binary=:all: \
				--python-version 3.11 --retries 1 --timeout 20 -d "$dir/wheels" \
				"passagemath-standard==$passagemath_version"
	} >"$dir/log" 2>&1 || status=$?
	# Why it could not fetch says more than pip's last line (no matching
	# distribution): a certificate it could not verify (a proxy's own CA
	# missing from this host's trust), or a connection that failed.
	index_error=$(grep -m 1 -o "certificate verify failed: [^(']*" "$dir/log" ||
		grep -m 1 -o "connection broken by '[A-Za-z]*('[^']*'" "$dir/log" ||
		grep -v '^[[:space:]]*$' "$dir/log" | tail -n 1 | cut -c1-200)
	index_error=${index_error%"${index_error##*[![:space:]]}"}
	[ "$status" -ne 124 ] || index_error="no answer in 150 s"
	rm -rf "$dir"
	return "$status"
}

# choose_sage: Sage 10 where it is built or can be, else 9.5; one line says
# which and why. A Sage chosen by name stays.
choose_sage() {
	if [ -n "$sage" ]; then
		:
	elif as_account "podman image exists $sage10_image" 2>/dev/null; then
		sage=10 sage_why="the newest; its image is built"
	elif index_answers; then
		sage=10 sage_why="the newest; the Python package index answers, for passagemath's wheels"
		sage_by_index=yes
	else
		sage=9.5 sage_why="the Python package index does not answer (pip: ${index_error:-no message}), and Sage 10 is built from its wheels; Sage 9.5 comes from the apt mirror"
	fi
	image=$(image_of "$sage")
	say "Sage $sage, $image: $sage_why"
}

# remember_image RUN: the settings file of RUN's user (RUN runs a shell line
# as them) names the image where that is not sage-sandbox's default: Sage
# 9.5, chosen by name or all the machine could build. The two lines an
# earlier run wrote go first; an image line written by hand stays, and is
# said. A file that cannot be written is said, with the line to add: the
# image is built either way.
remember_image() {
	local run=$1 line= said file
	[ "$image" = "$sage10_image" ] || line="image = $image"
	if ! said=$($run "bash -s -- $(printf '%q ' "$line" "# written by setup.sh: Sage $sage, $sage_why")" \
		<<<"$remember_image_script"); then
		say "cannot update ${said%%$'\n'*}${line:+; add '$line' to it by hand}"
		return 0
	fi
	file=${said%%$'\n'*}
	case $said in
		*$'\n'"by hand") say "$file names an image by hand: left as it is" \
			"(sage-sandbox status says which runs)" ;;
		*$'\n'written) say "$file names $image: sage-sandbox runs it from now on" ;;
	esac
}
# As the file's owner, with the image line ($1, or none) and its comment
# ($2): prints the file's name (the one sage-sandbox reads: settings.c),
# then "by hand" or "written" where either is the case. sed joins a comment
# line to the next and drops both only where that is an image line.
remember_image_script='set -u
file=${SAGE_SANDBOX_SETTINGS:-${XDG_CONFIG_HOME:-$HOME/.config}/sage-sandbox/settings}
echo "$file"
if [ -e "$file" ]; then
	sed -i --follow-symlinks "/^# written by setup.sh: Sage /{\$d;N;/\\nimage = [^\\n]*\$/d;s/^[^\\n]*\\n//}" "$file" || exit 1
	if grep -qE "^[[:space:]]*image[[:space:]]*=" "$file"; then echo "by hand"; exit 0; fi
fi
[ -n "$1" ] || exit 0
mkdir -p "${file%/*}" || exit 1
{ [ ! -s "$file" ] || [ -z "$(tail -c 1 "$file")" ] || echo; printf "%s\n%s\n" "$2" "$1"; } >>"$file" || exit 1
echo written'

# The commands that work now, for the user who ran setup.sh.
say_next_steps() {
	local dir=$1
	cat >&2 <<-EOF
		setup: done. sage-sandbox is installed in /usr/local/bin; it runs as an
		setup: unprivileged user with the image in their podman storage: $account.
		setup: Next, as root:
		setup:   echo 'print(factor(2^64+1))' | su - $account -c 'sage-sandbox run'
		setup:   su - $account -c 'sage-sandbox run FILE'   (FILE readable by $account)
		setup:   su - $account -c 'sage-sandbox self-test'
		setup: Or as yourself (LM Studio on a desktop, with rootless podman working):
		setup:   $src/setup.sh image --for YOU   (as root; or ./setup.sh image as YOU)
		setup:   then: sage-sandbox run FILE
		setup: Built tree: $dir; manual: man sage-sandbox
	EOF
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
	local dir=$1 run=$2 use
	# The image is named: the tests ignore settings files, and the example
	# runs what was just built. The suite starts with no container of a
	# killed earlier run (each test expects none left): cleanup removes
	# them and spares live runs.
	use="export SAGE_SANDBOX_IMAGE=$image && "
	case $action in
		example) $run "cd $dir && make -s && ${use}./sage-sandbox run examples/seed.sage" ;;
		check) $run "cd $dir && make -s && ./sage-sandbox cleanup && ${use}make -s check" ;;
		core) $run "cd $dir && make -s && ./sage-sandbox cleanup && ${use}make -s check-core" ;;
		image) ;;
	esac
}

as_self() { bash -c "$*"; }

if [ "$(id -u)" -ne 0 ]; then
	[ "$action" != account ] || die "'account' creates a user: run it as root"
	# sage_in_storage: where no Sage is named, the newest whose image this
	# user's storage holds, if any.
	sage_in_storage() {
		[ -z "$sage" ] || return 0
		if podman image exists "$sage10_image" 2>/dev/null; then
			sage=10 sage_why="the newest; its image is in your podman storage"
		elif podman image exists "$sage95_image" 2>/dev/null; then
			sage=9.5 sage_why="the Sage in your podman storage (./setup.sh image --sage 10 asks for Sage 10)"
		fi
		[ -z "$sage" ] || image=$(image_of "$sage")
	}
	sage_in_storage
	if [ -n "$image" ] && podman image exists "$image" 2>/dev/null; then
		say "Sage $sage, $image: $sage_why"
		case $action in example|image) remember_image as_self ;; esac
	else
		# The image goes into this user's own storage; building or copying
		# it needs root for a moment. As root, setup.sh chooses the Sage
		# where none is named, says why, and writes this user's settings
		# file where it must.
		command -v sudo >/dev/null ||
			die "no ${image:-Sage image} in your podman storage; as root run: $src/setup.sh image${sage:+ --sage $sage} --for $(id -un)"
		say "asking sudo to put ${image:-the newest Sage this machine can build} in your podman storage"
		sudo "$src/setup.sh" image ${sage:+--sage "$sage"} --for "$(id -un)"
		sage_in_storage
	fi
	[ "$action" = image ] && { say "image $image is ready for $(id -un): try 'make && ./sage-sandbox self-test'"; exit 0; }
	run_action "$src" as_self
	exit
fi

if [ "$action" = account ]; then
	create_account
	exit 0
fi
install_packages
if [ -n "$for_user" ]; then
	[ "$for_user" != root ] || die "root cannot run sage-sandbox; name an unprivileged user"
	id "$for_user" >/dev/null 2>&1 || die "no user $for_user"
	expect_rootless_podman "$for_user"
	create_account
	delegate_cpu_group "$for_user"
	choose_sage
	build_or_fall_back
	build_image "$for_user"
	remember_image as_account
	remember_image "as_user $for_user"
	say "next, as $for_user: sage-sandbox self-test (or ./sage-sandbox self-test after make)"
	exit 0
fi
create_account
choose_sage
# check on Sage 10 needs 9.5's image too: the official-layout test images
# (tests/official-images.sh) are made of it, and CI's second pass runs on
# it. Built beside Sage 10's, in a root of its own: the two builds mostly
# wait on the network and the disk.
if [ "$action" = check ] && [ "$sage" != 9.5 ]; then
	(sage=9.5 image=$sage95_image && build_image) &
	second_build=$!
fi
build_or_fall_back
wait_second_build || die "building $sage95_image failed (above)"
case $action in example|image) remember_image as_account ;; esac
[ "$action" = image ] && exit 0
dir=$(stage_tree)
if [ "$action" = check ]; then
	# As root, sage-sandbox must refuse to run (podman is not rootless here):
	# this part of the suite can only run as root.
	as_account "cd $dir && make -s"
fi
suite_status=0
if [ "$action" = check ]; then
	# Its failure is recorded, not fatal: the rest of the suite still runs.
	(cd "$dir" && SAGE_SANDBOX_IMAGE=$image bats --timing tests/000-root.bats) || suite_status=$?
fi
run_action "$dir" as_account || suite_status=$?
if [ "$action" = check ]; then
	# A real single-node Slurm (tests/slurm.sh) runs batch's example script
	# as the account: its daemons need root, so this part of the suite runs
	# as root, after the rest whatever its outcome.
	(cd "$dir" && SAGE_SANDBOX_IMAGE=$image bats tests/140-slurm.bats) || suite_status=$?
fi
[ "$suite_status" -eq 0 ] || exit "$suite_status"
if [ "$action" = example ]; then
	make -s -C "$dir" install PREFIX=/usr/local >/dev/null
	say_next_steps "$dir"
fi
