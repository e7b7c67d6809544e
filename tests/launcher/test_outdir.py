# tests/launcher/test_outdir.py: SAGE_SANDBOX_OUT sent back
# (launcher/outdir.py): the exact F, D, G and Z frames for a tree of every
# kind of entry and for each limit, and the directory emptied between a
# session's cells.
import os
import stat
import unittest
from unittest import mock

from launcher import frames, outdir, tmpreset
from launcher.frames import MAX_FRAME
from launcher.outdir import Limits

from .support import as_root, frames_sent_by, snapshot, temporary_directory, write_file

ROOMY = Limits(files=100, file_bytes=1 << 20, total_bytes=10 << 20)


def sent_file(path, data):
    """The frames of a file sent whole: its name, its bytes, its end."""
    return [(b"F", path)] + [(b"D", data[i:i + MAX_FRAME])
                             for i in range(0, len(data), MAX_FRAME)] + [(b"G", b"")]


class SendTest(unittest.TestCase):
    def setUp(self):
        base = temporary_directory(self)
        self.out = os.path.join(base, "out")
        os.mkdir(self.out, 0o700)
        self.outside = os.path.join(base, "outside")
        write_file(self.outside, b"a secret of the host")

    def path(self, relative):
        return os.path.join(self.out, relative)

    def send(self, limits, directory=None):
        return frames_sent_by(lambda writer: outdir.send(writer, limits, directory or self.out))

    def make_every_kind(self):
        write_file(self.path("a.txt"), b"hello")
        os.mkdir(self.path("b"))
        write_file(self.path("b/c.txt"), b"see")
        os.mkdir(self.path("b/empty"))
        os.mkfifo(self.path("d.fifo"))
        os.symlink(self.outside, self.path("e.link"))
        write_file(self.path("g1"), b"linked")
        os.link(self.path("g1"), self.path("g2"))
        write_file(self.path("h.empty"), b"")

    def test_every_kind_of_entry(self):
        self.make_every_kind()
        self.assertEqual(self.send(ROOMY), (
            sent_file(b"a.txt", b"hello") +
            sent_file(b"b/c.txt", b"see") +
            [(b"Z", b"special\0d.fifo"),
             (b"Z", b"symlink\0e.link"),
             (b"Z", b"hardlink\0g1"),
             (b"Z", b"hardlink\0g2"),
             (b"F", b"h.empty"), (b"G", b"")]))

    def test_the_limits_in_order_count_size_total(self):
        write_file(self.path("1"), b"x" * 10)   # the largest a file may be
        write_file(self.path("2"), b"x" * 11)   # too large
        write_file(self.path("3"), b"x" * 6)    # 16 in all
        write_file(self.path("4"), b"x" * 5)    # 21: over the total
        write_file(self.path("5"), b"x" * 4)    # 20: the total exactly
        write_file(self.path("6"), b"x")        # a fourth file
        write_file(self.path("7"), b"x" * 11)   # too many and too large
        got = self.send(Limits(files=3, file_bytes=10, total_bytes=20))
        self.assertEqual(got, (
            sent_file(b"1", b"x" * 10) +
            [(b"Z", b"size\x002")] +
            sent_file(b"3", b"x" * 6) +
            [(b"Z", b"total\x004")] +
            sent_file(b"5", b"x" * 4) +
            [(b"Z", b"count\x006"), (b"Z", b"count\x007")]))

    def test_no_file_at_all(self):
        write_file(self.path("a"), b"a")
        self.assertEqual(self.send(Limits(0, 0, 0)), [(b"Z", b"count\0a")])

    def test_a_large_file_in_frames_of_the_largest_size(self):
        data = os.urandom(2 * MAX_FRAME + 7)
        write_file(self.path("big"), data)
        got = self.send(ROOMY)
        self.assertEqual(got, sent_file(b"big", data))
        self.assertEqual([len(d) for k, d in got if k == b"D"], [MAX_FRAME, MAX_FRAME, 7])

    def test_directories_deeper_than_the_limit(self):
        parts = ["d%d" % i for i in range(outdir.MAX_DEPTH)]
        os.makedirs(self.path("/".join(parts)))
        write_file(self.path("/".join(parts[:-1] + ["f"])), b"deepest sent")
        write_file(self.path("/".join(parts + ["g"])), b"too deep")
        deepest = "/".join(parts[:-1]).encode()
        self.assertEqual(self.send(ROOMY), (
            [(b"Z", b"depth\0" + deepest + b"/d%d/" % (outdir.MAX_DEPTH - 1))] +
            sent_file(deepest + b"/f", b"deepest sent")))

    def test_names_that_are_not_utf8(self):
        name = b"caf\xe9 \xff"
        write_file(os.path.join(os.fsencode(self.out), name), b"bytes")
        self.assertEqual(self.send(ROOMY), sent_file(name, b"bytes"))

    def test_a_long_name_is_cut_in_the_z_frame(self):
        # Longer than PATH_MAX as a whole: made one directory at a time.
        fd = os.open(self.out, os.O_RDONLY | os.O_DIRECTORY)
        for _ in range(15):
            os.mkdir("d" * 255, dir_fd=fd)
            inner = os.open("d" * 255, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.mkfifo("f" * 255, dir_fd=fd)
        os.close(fd)
        [(kind, data)] = self.send(ROOMY)
        self.assertEqual(kind, b"Z")
        self.assertEqual(data, b"special\0" + ((b"d" * 255 + b"/") * 15 + b"f" * 255)[:4000])

    def test_the_directory_itself_a_link(self):
        os.rmdir(self.out)
        real = self.out + ".real"
        os.mkdir(real)
        write_file(os.path.join(real, "f"), b"f")
        os.symlink(real, self.out)
        self.assertEqual(self.send(ROOMY), [])

    def test_the_directory_missing(self):
        os.rmdir(self.out)
        self.assertEqual(self.send(ROOMY), [])

    def test_unreadable_entries(self):
        if as_root():
            self.skipTest("root reads whatever the modes")
        write_file(self.path("a-unreadable"), b"x", 0)
        os.mkdir(self.path("b-closed"))
        write_file(self.path("b-closed/f"), b"f")
        os.chmod(self.path("b-closed"), 0)
        write_file(self.path("c"), b"c")
        self.assertEqual(self.send(ROOMY), (
            [(b"Z", b"unreadable\0a-unreadable"), (b"Z", b"unreadable\0b-closed/")] +
            sent_file(b"c", b"c")))

    def test_a_host_gone_is_no_unreadable_file(self):
        # The frame write's error is the host's: it ends the launcher. Taken
        # as the file's read error, it was sent on as "unreadable".
        write_file(self.path("a.txt"), b"hello")
        r, w = os.pipe()
        os.close(r)
        writer = frames.Writer(w)
        sent = []
        writer.send = lambda kind, data=b"": (
            sent.append(kind), kind == b"D" and os.write(w, b"x"))
        try:
            with self.assertRaises(BrokenPipeError):
                outdir.send(writer, ROOMY, self.out)
        finally:
            os.close(w)
        self.assertEqual(sent, [b"F", b"D"])
        self.assertFalse(any(writer.read))  # zeroed, though not sent


class EmptyTest(unittest.TestCase):
    def setUp(self):
        base = temporary_directory(self)
        self.out = os.path.join(base, "out")
        self.outside = os.path.join(base, "outside")
        os.mkdir(self.outside)
        write_file(os.path.join(self.outside, "keep"), b"keep")

    def assertEmptyDirectory(self):
        st = os.lstat(self.out)
        self.assertTrue(stat.S_ISDIR(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o700)
        self.assertEqual(os.listdir(self.out), [])

    def test_whatever_a_cell_left(self):
        outside = snapshot(self.outside)
        os.makedirs(os.path.join(self.out, "a", "b"))
        write_file(os.path.join(self.out, "a", "b", "f"), b"f", 0)
        os.chmod(os.path.join(self.out, "a", "b"), 0)
        os.chmod(os.path.join(self.out, "a"), 0o300)
        os.symlink(self.outside, os.path.join(self.out, "link"))
        os.mkfifo(os.path.join(self.out, "fifo"))
        os.chmod(self.out, 0o500)
        self.assertTrue(outdir.empty(self.out))
        self.assertEmptyDirectory()
        self.assertEqual(snapshot(self.outside), outside)

    def test_a_link_in_its_place(self):
        outside = snapshot(self.outside)
        os.symlink(self.outside, self.out)
        self.assertTrue(outdir.empty(self.out))
        self.assertEmptyDirectory()
        self.assertEqual(snapshot(self.outside), outside)

    def test_a_file_in_its_place(self):
        write_file(self.out, b"not a directory")
        self.assertTrue(outdir.empty(self.out))
        self.assertEmptyDirectory()

    def test_false_where_it_cannot(self):
        with mock.patch.object(tmpreset, "MAX_DEPTH", 3):
            os.makedirs(os.path.join(self.out, "a", "b", "c"))
            self.assertFalse(outdir.empty(self.out))


if __name__ == "__main__":
    unittest.main()
