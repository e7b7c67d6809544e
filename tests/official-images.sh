#!/bin/bash
# official-images.sh: test images with the layouts of the official
# sagemath/sagemath images, derived in seconds from the Debian image (the
# official ones cannot be pulled on this project's machines).
#
#   official-images.sh build    build the missing ones (as the account)
#   official-images.sh names    print "LAYOUT IMAGE" for each
#   official-images.sh base     print the image they are made of
#   official-images.sh remove   remove them
#
# Layouts (from sagemath/sage docker/Dockerfile):
#   official-10.4  Sage in /home/sage/sage, its Python a venv at
#                  local/var/lib/sage/venv-python3.11, no python3 on PATH,
#                  /usr/bin/sage -> /home/sage/sage/sage, user sage (1000);
#                  Sage's data where the venv's prefix says (Debian's Sage
#                  looks for GAP and its data there: without them, GAP's
#                  first use crashed the process)
#   official-10.9  the same with a system python3 on PATH that cannot
#                  import Sage, user sage as uid 1001, /home/sage mode 0750
#   broken         Debian's layout whose sage.all_cmdline fails to import,
#                  while sage.version (what the image probe asks) works
#   gap-crash      Debian's layout whose GAP cannot start (its lib/init.g
#                  removed, with the saved workspace GAP would start from
#                  instead and setup.sh's first-use files, which link it):
#                  GAP's first use, a warm-up's too, ends the process with
#                  SIGSEGV
# Each has the official ENTRYPOINT (sage -sh -c), CMD, WORKDIR and HOME,
# none of which may matter to sage-sandbox. The official layouts have none
# of the files setup.sh adds for Sage's first use (launcher/firstuse.py),
# as an image of the user's own has none.
set -euo pipefail

# Always Debian's Sage 9.5 image, whatever image the suite runs on: the
# layouts below are made of its files (./setup.sh check builds it beside
# Sage 10's).
base=localhost/sagemath-debian:bookworm
prefix=localhost/sage-sandbox-test

official_layout() {
	cat <<-'EOF_LAYOUT'
	USER root
	RUN set -e; \
	    rm -rf /usr/local/share/sage-sandbox/first-use; \
	    mkdir -p /usr/lib/sage-test-python; \
	    mv /usr/bin/python3.11 /usr/lib/sage-test-python/; \
	    rm -f /usr/bin/python3; \
	    venv=/home/sage/sage/local/var/lib/sage/venv-python3.11; \
	    mkdir -p "$venv/bin" /home/sage/sage/local/bin; \
	    ln -s /usr/lib/sage-test-python/python3.11 "$venv/bin/python3"; \
	    ln -s python3 "$venv/bin/python"; \
	    printf 'home = /usr/lib/sage-test-python\ninclude-system-site-packages = true\nversion = 3.11\n' \
	        >"$venv/pyvenv.cfg"; \
	    mkdir -p "$venv/lib"; \
	    ln -s /usr/lib/gap "$venv/lib/gap"; \
	    ln -s /usr/share "$venv/share"; \
	    printf '%s\n' '#!/bin/sh' \
	        '# A stand-in for Sage'"'"'s own sage script: its venv first on PATH.' \
	        'SAGE_ROOT=/home/sage/sage' \
	        'SAGE_VENV=$SAGE_ROOT/local/var/lib/sage/venv-python3.11' \
	        'PATH=$SAGE_VENV/bin:$SAGE_ROOT/local/bin:$PATH' \
	        'export SAGE_ROOT SAGE_VENV PATH' \
	        'case "$1" in' \
	        '-python) shift; exec "$SAGE_VENV/bin/python3" "$@" ;;' \
	        '-sh) shift; exec /bin/sh "$@" ;;' \
	        '*) exec "$SAGE_VENV/bin/python3" -c "import sage.all; print(sage.all.version())" ;;' \
	        'esac' >/home/sage/sage/sage; \
	    chmod 755 /home/sage/sage/sage; \
	    ln -sf /home/sage/sage/sage /usr/bin/sage; \
	    printf '#!/bin/sh\nexec sage -sh -c "$*"\n' >/usr/local/bin/sage-entrypoint; \
	    chmod 755 /usr/local/bin/sage-entrypoint; \
	    chown -R sage:sage /home/sage
	EOF_LAYOUT
}

official_entry() {
	cat <<-'EOF_ENTRY'
	USER sage
	WORKDIR /home/sage
	ENV HOME=/home/sage LC_ALL=C.UTF-8
	ENTRYPOINT ["/usr/local/bin/sage-entrypoint"]
	CMD ["sage"]
	EOF_ENTRY
}

containerfile() {
	case $1 in
	official-10.4)
		echo "FROM $base"
		official_layout
		official_entry
		;;
	official-10.9)
		echo "FROM $prefix:official-10.4"
		cat <<-'EOF_109'
		USER root
		RUN set -e; \
		    usermod -u 1001 sage; groupmod -g 1001 sage; \
		    chown -R sage:sage /home/sage; chmod 0750 /home/sage; \
		    printf '#!/bin/sh\n# the system python3: it cannot import Sage\nexec /usr/lib/sage-test-python/python3.11 -I -S "$@"\n' \
		        >/usr/local/bin/python3; \
		    chmod 755 /usr/local/bin/python3
		EOF_109
		official_entry
		;;
	broken)
		echo "FROM $base"
		cat <<-'EOF_BROKEN'
		USER root
		RUN echo 'raise ImportError("broken on purpose by the test image")' \
		    >/usr/lib/python3/dist-packages/sage/all_cmdline.py
		EOF_BROKEN
		official_entry
		;;
	gap-crash)
		echo "FROM $base"
		cat <<-'EOF_GAP'
		USER root
		RUN rm -rf /usr/share/gap/lib/init.g /usr/local/share/sage-sandbox/libgap-workspace-* \
		    /usr/local/share/sage-sandbox/first-use
		USER sage
		EOF_GAP
		;;
	esac
}

layouts=(official-10.4 official-10.9 broken gap-crash)

case ${1:-} in
build)
	podman image exists "$base" || { echo "official-images: $base is missing: ./setup.sh check as root builds it" >&2; exit 1; }
	# A change to this script or to the base image rebuilds them all: each
	# carries the hash of both.
	recipe=$({ cat "$0"; podman image inspect --format '{{.Id}}' "$base"; } |
		sha256sum | cut -c1-16)
	context=$(mktemp -d)
	trap 'rmdir "$context"' EXIT
	for layout in "${layouts[@]}"; do
		[ "$(podman image inspect --format '{{index .Labels "sage-sandbox-test.recipe"}}' \
			"$prefix:$layout" 2>/dev/null)" != "$recipe" ] || continue
		# The stale one goes first, not left behind untagged (where a
		# layout built on it still holds it, the build replaces the tag).
		podman rmi "$prefix:$layout" >/dev/null 2>&1 || true
		# RUN steps need --network=none under rootless podman 4.3 here
		# (slirp4netns fails); none of them needs a network.
		{ containerfile "$layout"; echo "LABEL sage-sandbox-test.recipe=$recipe"; } |
			podman build --quiet --network=none --pull=never -t "$prefix:$layout" -f - \
				"$context" >/dev/null
	done
	;;
base)
	echo "$base"
	;;
names)
	for layout in "${layouts[@]}"; do
		echo "$layout $prefix:$layout"
	done
	;;
remove)
	# The layouts built on another first.
	for layout in official-10.9 "${layouts[@]}"; do
		podman rmi -f "$prefix:$layout" >/dev/null 2>&1 || true
	done
	;;
*)
	echo "usage: official-images.sh build|names|base|remove" >&2
	exit 2
	;;
esac
