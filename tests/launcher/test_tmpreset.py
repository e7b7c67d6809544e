# tests/launcher/test_tmpreset.py: /tmp recorded and put back whole
# (launcher/tmpreset.py), on a temporary directory standing for /tmp: what
# a call did, in any mode, is gone after reset(), no link is followed, and
# what cannot be put back ends the container (CannotReset).
import os
import stat
import unittest
from unittest import mock

from launcher import tmpreset
from launcher.tmpreset import CannotReset

from .support import as_root, remove_tree, snapshot, temporary_directory, write_file

OLD = 1_000_000_000 * 10**9  # 2001: a time no write in the test makes


def make_recorded_tree(root):
    """What Sage's import might leave in /tmp: directories of several
    modes, files (one empty, one read-only), links (one dangling, one to
    outside)."""
    os.chmod(root, 0o1777)
    os.mkdir(os.path.join(root, "sage-home"), 0o700)
    os.mkdir(os.path.join(root, "sage-home", ".cache"), 0o755)
    write_file(os.path.join(root, "sage-home", ".cache", "index"), b"cached\n" * 100, 0o644)
    write_file(os.path.join(root, "sage-home", ".cache", "empty"), b"", 0o600)
    os.mkdir(os.path.join(root, "dot-sage"), 0o700)
    write_file(os.path.join(root, "dot-sage", "readonly"), b"\x00\xff binary", 0o400)
    os.mkdir(os.path.join(root, "dot-sage", "locked"), 0o700)
    write_file(os.path.join(root, "dot-sage", "locked", "inside"), b"in a 0500 directory")
    os.chmod(os.path.join(root, "dot-sage", "locked"), 0o500)
    os.symlink("/nonexistent/target", os.path.join(root, "dangling"))
    os.symlink("sage-home/.cache/index", os.path.join(root, "relative"))
    os.mkdir(os.path.join(root, "sage-sandbox-out"), 0o700)
    # Times a call cannot reproduce by writing: the reset must set them.
    for path in ("sage-home/.cache/index", "dot-sage/readonly", "sage-home/.cache"):
        os.utime(os.path.join(root, path), ns=(OLD, OLD))


class Trees(unittest.TestCase):
    def setUp(self):
        base = temporary_directory(self)
        self.root = os.path.join(base, "tmp")
        os.mkdir(self.root)
        # Outside the recorded tree: what a call's links point at.
        self.outside = os.path.join(base, "outside")
        os.mkdir(self.outside, 0o755)
        write_file(os.path.join(self.outside, "keep"), b"outside, untouched", 0o644)
        os.mkdir(os.path.join(self.outside, "dir"), 0o755)
        write_file(os.path.join(self.outside, "dir", "keep"), b"also untouched", 0o644)

    def path(self, relative):
        return os.path.join(self.root, relative)

    def assertOutsideUntouched(self, before):
        self.assertEqual(snapshot(self.outside), before)


class RecordAndResetTest(Trees):
    def test_reset_right_after_record_changes_nothing(self):
        make_recorded_tree(self.root)
        before = snapshot(self.root)
        tmpreset.reset(tmpreset.record(self.root), self.root)
        self.assertEqual(snapshot(self.root), before)

    def test_record_lists_parents_before_their_content(self):
        make_recorded_tree(self.root)
        root_mode, entries = tmpreset.record(self.root)
        self.assertEqual(root_mode, stat.S_IMODE(os.stat(self.root).st_mode))
        paths = [e.path for e in entries]
        self.assertEqual(sorted(paths), sorted(snapshot(self.root)))
        for i, path in enumerate(paths):
            parent = path.rpartition("/")[0]
            if parent:
                self.assertLess(paths.index(parent), i, path)
        by_path = {e.path: e for e in entries}
        self.assertEqual(by_path["dangling"].content, "/nonexistent/target")
        self.assertEqual(by_path["dangling"].kind, stat.S_IFLNK)
        self.assertEqual(by_path["dot-sage/readonly"].content, b"\x00\xff binary")
        self.assertEqual(by_path["dot-sage/readonly"].mode, 0o400)
        self.assertEqual(by_path["dot-sage/locked"].mode, 0o500)
        self.assertIsNone(by_path["dot-sage"].content)

    def test_everything_a_call_did_is_undone(self):
        make_recorded_tree(self.root)
        before = snapshot(self.root)
        outside = snapshot(self.outside)
        recorded = tmpreset.record(self.root)
        self.call_does_its_worst()
        self.assertNotEqual(snapshot_or_none(self.root), before)
        tmpreset.reset(recorded, self.root)
        self.assertEqual(snapshot(self.root), before)
        self.assertEqual(stat.S_IMODE(os.stat(self.root).st_mode), recorded[0])
        self.assertOutsideUntouched(outside)

    def call_does_its_worst(self):
        p = self.path
        # New files, and a deep tree of directories.
        write_file(p("new"), b"left for the next call")
        deep = p("deep")
        for i in range(30):
            deep = os.path.join(deep, "d%d" % i)
        os.makedirs(deep)
        write_file(os.path.join(deep, "bottom"), b"x")
        # Links to outside, named where a recorded entry was and not.
        os.symlink(self.outside, p("to-outside"))
        os.symlink(os.path.join(self.outside, "keep"), p("to-outside-file"))
        remove_tree(p("sage-home/.cache"))
        os.symlink(os.path.join(self.outside, "dir"), p("sage-home/.cache"))
        # A hard link to a file outside: removing it must not touch the file.
        os.link(os.path.join(self.outside, "keep"), p("hardlink"))
        # A FIFO: record() refuses one, reset() removes it.
        os.mkfifo(p("fifo"))
        # A recorded file written in place: same size, times put back, so
        # that nothing stat() shows tells it changed.
        readonly = p("dot-sage/readonly")
        st = os.stat(readonly)
        os.chmod(readonly, 0o600)
        with open(readonly, "r+b") as f:
            f.write(b"PLANTED!!")
        os.chmod(readonly, 0o400)
        os.utime(readonly, ns=(st.st_atime_ns, st.st_mtime_ns))
        # Content planted in directories chmod'ed 000 and 0300 (write and
        # search but no listing), one of them nested inside the other.
        os.makedirs(p("hidden/inner"))
        write_file(p("hidden/inner/maxima-init.lisp"), b"(run-shell-command)")
        write_file(p("hidden/matplotlibrc"), b"backend: evil")
        os.chmod(p("hidden/inner"), 0o300)
        os.chmod(p("hidden"), 0o000)
        os.mkdir(p("dot-sage/wx"))
        write_file(p("dot-sage/wx/planted"), b"planted")
        os.chmod(p("dot-sage/wx"), 0o300)
        # A recorded read-only directory given content.
        os.chmod(p("dot-sage/locked"), 0o700)
        write_file(p("dot-sage/locked/more"), b"more")
        os.chmod(p("dot-sage/locked"), 0o000)
        # Recorded entries removed, replaced, their modes changed.
        os.unlink(p("relative"))
        os.unlink(p("dangling"))
        os.symlink("/elsewhere", p("dangling"))
        os.rmdir(p("sage-sandbox-out"))
        write_file(p("sage-sandbox-out"), b"a file where a directory was")
        os.chmod(p("sage-home"), 0o755)

    def test_a_recorded_directory_replaced_by_a_link_is_not_followed(self):
        make_recorded_tree(self.root)
        recorded = tmpreset.record(self.root)
        outside = snapshot(self.outside)
        remove_tree(self.path("dot-sage"))
        os.symlink(self.outside, self.path("dot-sage"))
        tmpreset.reset(recorded, self.root)
        self.assertOutsideUntouched(outside)
        self.assertFalse(os.path.islink(self.path("dot-sage")))

    def test_an_empty_tree(self):
        recorded = tmpreset.record(self.root)
        self.assertEqual(recorded[1], [])
        write_file(self.path("a"), b"a")
        os.mkdir(self.path("b"), 0)
        tmpreset.reset(recorded, self.root)
        self.assertEqual(os.listdir(self.root), [])

    def test_a_tree_unlike_the_recording_after_the_rebuild(self):
        # The rebuild falls short (here: made to leave out one entry): the
        # comparison with the recording must refuse the result.
        make_recorded_tree(self.root)
        recorded = tmpreset.record(self.root)
        rebuild = tmpreset._rebuild
        with mock.patch.object(tmpreset, "_rebuild",
                               lambda root, entries, newest_first:
                               rebuild(root, entries[:-1], newest_first)):
            with self.assertRaisesRegex(CannotReset, "not as recorded"):
                tmpreset.reset(recorded, self.root)

    def test_each_directory_lists_as_recorded(self):
        # On tmpfs (the container's /tmp), readdir's order is the order
        # entries were made in: made in name order, DOT_SAGE listed in
        # another order than a fresh container's (attack helper 169).
        if not os.path.isdir("/dev/shm"):
            self.skipTest("no /dev/shm here")
        root = os.path.join(temporary_directory(self, parent="/dev/shm"), "tmp")
        os.mkdir(root)
        for name in ("m", "b", "z", "a"):
            os.mkdir(os.path.join(root, name))
        for name in ("y", "c", "x"):
            write_file(os.path.join(root, "b", name), b"")
        os.symlink("b", os.path.join(root, "k"))
        before = {d: os.listdir(os.path.join(root, d)) for d in ("", "b")}
        recorded = tmpreset.record(root)
        write_file(os.path.join(root, "b", "new"), b"")
        tmpreset.reset(recorded, root)
        self.assertEqual({d: os.listdir(os.path.join(root, d)) for d in ("", "b")}, before)

    def test_a_changed_root_mode_is_not_put_back_silently(self):
        make_recorded_tree(self.root)
        recorded = tmpreset.record(self.root)
        os.chmod(self.root, 0o700)
        with self.assertRaises(CannotReset):
            tmpreset.reset(recorded, self.root)

    def test_a_recorded_link_replaced_by_a_directory(self):
        make_recorded_tree(self.root)
        before = snapshot(self.root)
        recorded = tmpreset.record(self.root)
        os.unlink(self.path("relative"))
        os.mkdir(self.path("relative"))
        write_file(self.path("relative/x"), b"x")
        tmpreset.reset(recorded, self.root)
        self.assertEqual(snapshot(self.root), before)


def snapshot_or_none(root):
    """A snapshot where the tree can be read (as root it always can)."""
    try:
        return snapshot(root)
    except OSError:
        return None


class RecordRefusesTest(Trees):
    def test_a_fifo(self):
        os.mkdir(self.path("dir"))
        os.mkfifo(self.path("dir/fifo"))
        with self.assertRaisesRegex(CannotReset, "dir/fifo"):
            tmpreset.record(self.root)

    def test_more_bytes_than_are_kept(self):
        half = tmpreset.MAX_RECORDED_BYTES // 2
        write_file(self.path("a"), b"a" * half)
        write_file(self.path("b"), b"b" * (tmpreset.MAX_RECORDED_BYTES - half))
        tmpreset.record(self.root)  # exactly the limit: kept
        write_file(self.path("c"), b"c")
        with self.assertRaises(CannotReset):
            tmpreset.record(self.root)

    def test_more_entries_than_are_kept(self):
        with mock.patch.object(tmpreset, "MAX_RECORDED_ENTRIES", 5):
            os.mkdir(self.path("d"))
            for name in ("d/1", "d/2", "e"):
                write_file(self.path(name))
            os.symlink("x", self.path("f"))
            self.assertEqual(len(tmpreset.record(self.root)[1]), 5)
            write_file(self.path("g"))
            with self.assertRaises(CannotReset):
                tmpreset.record(self.root)

    def test_directories_deeper_than_the_limit(self):
        with mock.patch.object(tmpreset, "MAX_DEPTH", 6):
            os.makedirs(self.path("/".join("d" * 5)))
            tmpreset.record(self.root)
            os.mkdir(self.path("/".join("d" * 6)))
            with self.assertRaises(CannotReset):
                tmpreset.record(self.root)

    def test_a_root_that_is_a_link(self):
        link = self.path("link")
        os.symlink(self.outside, link)
        with self.assertRaises(OSError):
            tmpreset.record(link)


class ResetRefusesTest(Trees):
    def test_a_tree_deeper_than_the_limit(self):
        with mock.patch.object(tmpreset, "MAX_DEPTH", 8):
            recorded = tmpreset.record(self.root)
            os.makedirs(self.path("/".join("d" * 7)))
            tmpreset.reset(recorded, self.root)  # one less: still put back
            self.assertEqual(os.listdir(self.root), [])
            os.makedirs(self.path("/".join("d" * 8)))
            with self.assertRaises(CannotReset):
                tmpreset.reset(recorded, self.root)

    def test_a_tree_deeper_than_the_real_limit(self):
        recorded = tmpreset.record(self.root)
        os.makedirs(self.path("/".join("d" * (tmpreset.MAX_DEPTH + 5))))
        with self.assertRaises(CannotReset):
            tmpreset.reset(recorded, self.root)

    def test_a_root_that_cannot_be_emptied(self):
        if as_root():
            self.skipTest("root removes entries whatever the directory's mode")
        recorded = tmpreset.record(self.root)
        write_file(self.path("left"), b"x")
        os.chmod(self.root, 0o500)
        self.addCleanup(os.chmod, self.root, 0o700)
        with self.assertRaises(CannotReset):
            tmpreset.reset(recorded, self.root)


class EmptyDirectoryTest(Trees):
    def empty(self, path):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            tmpreset.empty_directory(fd)
        finally:
            os.close(fd)

    def test_whatever_the_modes_inside(self):
        outside = snapshot(self.outside)
        os.makedirs(self.path("a/b/c"))
        write_file(self.path("a/b/c/f"), b"f", 0)
        os.chmod(self.path("a/b/c"), 0)
        os.chmod(self.path("a/b"), 0o300)
        os.chmod(self.path("a"), 0o100)
        os.symlink(self.outside, self.path("link"))
        os.symlink(os.path.join(self.outside, "dir"), self.path("dirlink"))
        os.mkfifo(self.path("fifo"))
        write_file(self.path("file"), b"x", 0)
        mode = stat.S_IMODE(os.stat(self.root).st_mode)
        self.empty(self.root)
        self.assertEqual(os.listdir(self.root), [])
        self.assertEqual(stat.S_IMODE(os.stat(self.root).st_mode), mode)
        self.assertOutsideUntouched(outside)

    def test_deeper_than_the_limit(self):
        with mock.patch.object(tmpreset, "MAX_DEPTH", 4):
            os.makedirs(self.path("a/b/c"))
            self.empty(self.root)
            self.assertEqual(os.listdir(self.root), [])
            os.makedirs(self.path("a/b/c/d"))
            with self.assertRaises(CannotReset):
                self.empty(self.root)


if __name__ == "__main__":
    unittest.main()
