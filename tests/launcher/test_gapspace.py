# tests/launcher/test_gapspace.py: Sage's lookup of libgap's saved
# workspace, wrapped (launcher/gapspace.py), against stand-ins for Sage's
# two modules: the image's workspace is linked where Sage finds none
# current, and nothing changes where Sage has its own, where the image's
# is for another GAP, older than GAP's files or unreadable, or where the
# image has none.
import os
import sys
import types
import unittest
from unittest import mock

from launcher import gapspace

from .support import temporary_directory


class GapspaceTest(unittest.TestCase):
    def setUp(self):
        self.dir = temporary_directory(self)
        os.mkdir(os.path.join(self.dir, "share"))
        self.kept = os.path.join(self.dir, "share", "libgap-workspace-")
        self.baked = self.kept + "0123abcd"
        with open(self.baked, "wb") as f:
            f.write(b"workspace")
        self.path = os.path.join(self.dir, "dot-sage", "gap", "libgap-workspace-a-host-0123abcd")
        self.gap_files_time = os.path.getmtime(self.baked) - 10
        saved = types.ModuleType("sage.libs.gap.saved_workspace")
        saved.workspace = self.sage_lookup
        saved.timestamp = lambda: self.gap_files_time
        places = types.ModuleType("sage.interfaces.gap_workspace")

        def prepare_workspace_dir(dir=None):
            os.makedirs(dir, exist_ok=True)
            with open(os.path.join(dir, "README.txt"), "w") as f:
                f.write("It is OK to delete all these cache files.\n")
            return dir
        places.prepare_workspace_dir = prepare_workspace_dir
        self.saved = saved
        modules = {name: types.ModuleType(name)
                   for name in ("sage", "sage.libs", "sage.libs.gap", "sage.interfaces")}
        modules["sage.libs.gap"].saved_workspace = modules["sage.libs.gap.saved_workspace"] = saved
        modules["sage.interfaces"].gap_workspace = modules["sage.interfaces.gap_workspace"] = places
        for patch in (mock.patch.object(gapspace, "KEPT", self.kept),
                      mock.patch.dict(sys.modules, modules)):
            patch.start()
            self.addCleanup(patch.stop)

    def sage_lookup(self, name="workspace"):
        """Sage's: the path, and whether a workspace there is current."""
        return self.path, os.path.exists(self.path)

    def test_none_current_the_images_is_linked_in_its_place(self):
        gapspace.install()
        self.assertEqual(self.saved.workspace(), (self.path, True))
        self.assertEqual(os.readlink(self.path), self.baked)
        self.assertEqual(sorted(os.listdir(os.path.dirname(self.path))),
                         ["README.txt", os.path.basename(self.path)])
        # Asked again (GAP's start asks once; another caller may): as Sage's.
        self.assertEqual(self.saved.workspace(), (self.path, True))

    def test_older_than_gaps_files_it_is_not_used(self):
        self.gap_files_time = os.path.getmtime(self.baked) + 10
        gapspace.install()
        self.assertEqual(self.saved.workspace(), (self.path, False))
        self.assertFalse(os.path.lexists(self.path))

    def test_one_for_another_gap_is_not_used(self):
        self.path = self.path.replace("0123abcd", "4567ef01")
        gapspace.install()
        self.assertEqual(self.saved.workspace(), (self.path, False))
        self.assertFalse(os.path.lexists(self.path))

    def test_an_unreadable_one_is_not_used(self):
        os.chmod(self.baked, 0)
        if os.access(self.baked, os.R_OK):
            self.skipTest("root reads it all the same")
        gapspace.install()
        self.assertEqual(self.saved.workspace(), (self.path, False))

    def test_another_workspace_name_is_sages(self):
        gapspace.install()
        self.assertEqual(self.saved.workspace("other"), (self.path, False))
        self.assertFalse(os.path.lexists(self.path))

    def test_an_image_without_one_is_left_as_it_is(self):
        os.unlink(self.baked)
        os.rmdir(os.path.dirname(self.baked))
        gapspace.install()
        self.assertEqual(self.saved.workspace, self.sage_lookup)


if __name__ == "__main__":
    unittest.main()
