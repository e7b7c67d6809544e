# launcher/gapspace.py: GAP's saved workspace, kept in the image (setup.sh's
# add_gap_workspace), for libgap's start.
#
# Sage's libgap starts from a saved workspace where DOT_SAGE holds one
# newer than GAP's files; else it reads GAP's library (about 1.3 s) and
# then saves a workspace there (57 MB on Sage 10, into the container's
# /tmp). A fresh container has none, so every run that used GAP paid
# both, and so did every warm-up. Here Sage's own lookup of that workspace
# (sage.libs.gap.saved_workspace.workspace) is wrapped: where it finds
# none current, the image's for the same GAP (its name ends in the hash
# Sage gives that GAP) is linked in its place, in DOT_SAGE's gap directory
# made as Sage makes it (prepare_workspace_dir), and GAP starts from it in
# 0.15 s (Sage 10), as a user's second Sage on their own machine does. A
# GAP restored from a workspace computes its environment, home and command
# line again, its random state is the one saved right after its first
# start (a fresh start's), and it runs its exit functions once as it
# restores, which save its history (~/.gap_hist on Sage 10, in ~/.gap on
# 9.5), as a second Sage's GAP does.
import functools
import os

KEPT = "/usr/local/share/sage-sandbox/libgap-workspace-"


def install():
    """Wraps Sage's lookup where the image keeps a workspace; nothing where
    it keeps none (an image setup.sh did not make) or this Sage's libgap
    looks elsewhere."""
    directory = os.path.dirname(KEPT)
    if not os.path.isdir(directory):
        return
    try:
        from sage.libs.gap import saved_workspace
        from sage.interfaces.gap_workspace import prepare_workspace_dir
        lookup = saved_workspace.workspace
    except (ImportError, AttributeError):
        return

    @functools.wraps(lookup)
    def workspace(name="workspace"):
        path, current = lookup(name)
        if current or name != "workspace":
            return path, current
        # Sage's own name for it ends in the hash of the GAP it is for.
        kept = KEPT + path.rsplit("-", 1)[-1]
        try:
            # As Sage's own test: no older than GAP's files; and readable
            # (GAP ends the process where it cannot read it).
            if not os.access(kept, os.R_OK) or os.path.getmtime(kept) < saved_workspace.timestamp():
                return path, current
            prepare_workspace_dir(os.path.dirname(path))
            os.symlink(kept, path)
        except OSError:
            return path, current
        return path, True

    saved_workspace.workspace = workspace
