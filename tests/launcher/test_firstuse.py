# tests/launcher/test_firstuse.py: the image's first-use files copied into
# a container's /tmp (launcher/firstuse.py), on temporary directories
# standing for both: every entry with its mode, links as links, the host
# name in its mark's place; HOME and DOT_SAGE, and what Sage's import made,
# left as they are.
import os
import stat
import unittest

from launcher import firstuse

from .support import temporary_directory, write_file


class InstallTest(unittest.TestCase):
    def setUp(self):
        base = temporary_directory(self)
        self.kept = os.path.join(base, "first-use")
        self.root = os.path.join(base, "tmp")
        for top in (self.kept, self.root):
            os.mkdir(top)
            for place in ("sage-home", "dot-sage"):
                os.mkdir(os.path.join(top, place), 0o755 if top == self.kept else 0o700)
        k = lambda *parts: os.path.join(self.kept, *parts)  # noqa: E731
        # As the image has them: each readable by all (setup.sh refuses
        # others), not each as the umask makes it.
        os.makedirs(k("dot-sage", "maxima", "binary", "5_50_0"))
        os.chmod(k("dot-sage", "maxima", "binary"), 0o555)
        os.mkdir(k("dot-sage", "gap"))
        write_file(k("dot-sage", "gap", "README.txt"), b"It is OK to delete\n", 0o644)
        os.symlink("/usr/local/share/sage-sandbox/libgap-workspace-abc",
                   k("dot-sage", "gap", "libgap-workspace-@HOSTNAME@-abc"))
        os.mkdir(k("dot-sage", "matplotlib"))
        write_file(k("dot-sage", "matplotlib", "fontlist.json"), b"{}" * 5000, 0o644)
        write_file(k("sage-home", ".gap_hist"), b"", 0o444)
        # What Sage's import made before the copy.
        os.mkdir(os.path.join(self.root, "dot-sage", "matplotlib"), 0o711)

    def at(self, *parts):
        return os.path.join(self.root, *parts)

    def mode(self, *parts):
        return stat.S_IMODE(os.lstat(self.at(*parts)).st_mode)

    def test_copies_each_entry_with_its_mode_and_the_host_name(self):
        firstuse.install(self.root, self.kept, hostname="c0ffee")
        self.assertEqual(self.mode("dot-sage", "maxima", "binary"), 0o555)
        self.assertTrue(os.path.isdir(self.at("dot-sage", "maxima", "binary", "5_50_0")))
        with open(self.at("dot-sage", "gap", "README.txt"), "rb") as f:
            self.assertEqual(f.read(), b"It is OK to delete\n")
        link = self.at("dot-sage", "gap", "libgap-workspace-c0ffee-abc")
        self.assertEqual(os.readlink(link), "/usr/local/share/sage-sandbox/libgap-workspace-abc")
        with open(self.at("dot-sage", "matplotlib", "fontlist.json"), "rb") as f:
            self.assertEqual(f.read(), b"{}" * 5000)
        self.assertEqual(self.mode("sage-home", ".gap_hist"), 0o444)
        self.assertEqual(os.path.getsize(self.at("sage-home", ".gap_hist")), 0)

    def test_leaves_home_dot_sage_and_what_the_import_made(self):
        firstuse.install(self.root, self.kept, hostname="h")
        self.assertEqual(self.mode("sage-home"), 0o700)
        self.assertEqual(self.mode("dot-sage"), 0o700)
        self.assertEqual(self.mode("dot-sage", "matplotlib"), 0o711)

    def test_a_file_already_there_is_kept(self):
        write_file(self.at("sage-home", ".gap_hist"), b"history of its own", 0o644)
        firstuse.install(self.root, self.kept, hostname="h")
        with open(self.at("sage-home", ".gap_hist"), "rb") as f:
            self.assertEqual(f.read(), b"history of its own")

    def test_a_failure_names_what_could_not_be_made(self):
        write_file(self.at("dot-sage", "gap"), b"not a directory")
        with self.assertRaises(OSError) as caught:
            firstuse.install(self.root, self.kept, hostname="h")
        self.assertEqual(caught.exception.filename, self.at("dot-sage", "gap", "README.txt"))

    def test_an_image_without_them_changes_nothing(self):
        before = sorted(os.listdir(self.at("dot-sage")))
        firstuse.install(self.root, os.path.join(self.kept, "none"), hostname="h")
        self.assertEqual(sorted(os.listdir(self.at("dot-sage"))), before)
        self.assertEqual(os.listdir(self.at("sage-home")), [])


if __name__ == "__main__":
    unittest.main()
