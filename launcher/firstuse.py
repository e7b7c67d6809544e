# launcher/firstuse.py: what a Sage's first use of Maxima, GAP and
# matplotlib leaves in HOME and DOT_SAGE, copied from the image into the
# container's /tmp once Sage is imported.
#
# A warm container's launcher has used them (warm.py), and what that left
# in /tmp stays for its calls (calls.py); a cold call's Sage had not, and a
# call that listed DOT_SAGE saw the difference (attack helper 166). The
# image keeps those files (setup.sh's add_first_use_files: Maxima's binary
# directory, GAP's history and its workspace's link, matplotlib's font
# list, on 9.5 fontconfig's cache and GAP's ~/.gap), and every container
# starts with them, cold or warm: the same listing, and a cold call's first
# plot no longer builds the font list (0.3 s, and a timer thread that took
# the name Thread-1 from the code's own first thread). An image setup.sh
# did not make keeps none: HOME and DOT_SAGE start as a fresh Sage's.
import os
import stat

from launcher import tmpreset

KEPT = "/usr/local/share/sage-sandbox/first-use"
# In a kept name, where Sage put the host's name (Sage 10's GAP workspace):
# each container has its own.
HOSTNAME_MARK = "@HOSTNAME@"


def install(root="/tmp", kept=KEPT, hostname=None):
    """Copies kept's tree into root, whose HOME and DOT_SAGE the launcher
    has made (main.py, DIRECTORIES) and are left as they are: directories,
    regular files and links with their modes, owned by this process's uid,
    dated now as a first use dates them. What is there already (Sage's
    import made it: DOT_SAGE's matplotlib directory) is kept as it is."""
    if not os.path.isdir(kept):
        return
    if hostname is None:
        hostname = sage_hostname()
    # A directory's mode is given once what it holds is made (one without
    # write permission could not be filled), the deepest first.
    made = []
    for directory, subdirectories, files in os.walk(kept):
        subdirectories.sort()
        here = os.path.join(root, os.path.relpath(directory, kept).replace(HOSTNAME_MARK, hostname))
        for name in subdirectories + sorted(files):
            source = os.path.join(directory, name)
            copy = os.path.join(here, name.replace(HOSTNAME_MARK, hostname))
            if os.path.lexists(copy):
                continue
            try:
                _copy(source, copy, made)
            except OSError as e:
                # Named by what could not be made (symlink's filename is
                # the link's target; write's, none).
                raise OSError(e.errno, e.strerror, copy) from e
    for copy, mode in reversed(made):
        os.chmod(copy, mode)


def _copy(source, copy, made):
    st = os.lstat(source)
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(source), copy)
    elif stat.S_ISDIR(st.st_mode):
        os.mkdir(copy, 0o700)
        made.append((copy, mode))
    elif stat.S_ISREG(st.st_mode):
        with open(source, "rb") as f:
            tmpreset.write_new_file(copy, f.read(), mode)


def sage_hostname():
    """The host name Sage puts in names (sage.env.HOSTNAME: $HOSTNAME, else
    the system's)."""
    try:
        from sage.env import HOSTNAME
        return HOSTNAME
    except ImportError:
        import socket
        return os.environ.get("HOSTNAME") or socket.gethostname()
