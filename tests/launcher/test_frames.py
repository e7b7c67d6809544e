# tests/launcher/test_frames.py: the frame codec (launcher/frames.py) over
# real pipes: what the Writer sends the Reader takes back whole, however the
# bytes arrive, and a stream that breaks the protocol is refused.
import os
import struct
import threading
import unittest

from launcher import frames
from launcher.frames import MAX_FRAME, ProtocolError, Reader, encode

from .support import Pipe, frames_sent_by

# Frames of every shape the stream carries: empty, one byte, binary with
# every byte value, and one that looks like a header itself.
SAMPLE = [(b"S", b""), (b"O", b"x"), (b"D", bytes(range(256))), (b"X", encode(b"Z", b"ab"))]


class EncodeTest(unittest.TestCase):
    def test_header_is_kind_then_big_endian_length(self):
        self.assertEqual(encode(b"C", b"abc"), b"C\x00\x00\x00\x03abc")
        self.assertEqual(encode(b"S"), b"S\x00\x00\x00\x00")
        self.assertEqual(encode(b"D", b"\0" * 0x010203)[:frames.HEADER], b"D\x00\x01\x02\x03")


class RoundTripTest(unittest.TestCase):
    def test_writer_to_reader(self):
        got = frames_sent_by(lambda writer: [writer.send(k, d) for k, d in SAMPLE])
        self.assertEqual(got, SAMPLE)

    def test_frames_of_the_largest_size_more_than_a_pipe_holds(self):
        sent = [(b"D", bytes([i]) * MAX_FRAME) for i in range(3)] + [(b"G", b"")]
        got = frames_sent_by(lambda writer: [writer.send(k, d) for k, d in sent])
        self.assertEqual(got, sent)

    def test_frames_cut_at_every_byte_boundary(self):
        stream = b"".join(encode(k, d) for k, d in SAMPLE)
        # Where each frame ends in the stream: the frames whole by a cut.
        ends, at = [], 0
        for kind, data in SAMPLE:
            at += frames.HEADER + len(data)
            ends.append(at)
        for cut in range(len(stream) + 1):
            with self.subTest(cut=cut):
                pipe = Pipe(self)
                reader = Reader(pipe.r)
                pipe.write(stream[:cut])
                if cut:
                    self.assertTrue(reader.fill())
                whole = sum(1 for end in ends if end <= cut)
                ready = []
                while True:
                    frame = reader.next_ready()
                    if frame is None:
                        break
                    ready.append(frame)
                self.assertEqual(ready, SAMPLE[:whole])
                pipe.write(stream[cut:])
                pipe.close_write()
                rest = []
                while True:
                    frame = reader.frame()
                    if frame is None:
                        break
                    rest.append(frame)
                self.assertEqual(ready + rest, SAMPLE)
                self.assertTrue(reader.ended)
                pipe.close()

    def test_bytes_arriving_one_at_a_time(self):
        stream = b"".join(encode(k, d) for k, d in SAMPLE)
        pipe = Pipe(self)
        reader = Reader(pipe.r)
        got = []
        for i, byte in enumerate(stream):
            pipe.write(bytes([byte]))
            self.assertTrue(reader.fill())
            frame = reader.next_ready()
            if frame is not None:
                got.append(frame)
                # A frame is whole exactly at its last byte.
                self.assertEqual(stream[:i + 1], b"".join(encode(k, d) for k, d in got))
        self.assertEqual(got, SAMPLE)
        self.assertEqual(reader.inbox, b"")

    def test_a_blocking_frame_waits_for_the_rest(self):
        pipe = Pipe(self)
        reader = Reader(pipe.r)
        whole = encode(b"C", b"print(1)")
        pipe.write(whole[:3])

        def rest_later():
            pipe.write(whole[3:])

        timer = threading.Timer(0.05, rest_later)
        timer.start()
        try:
            self.assertEqual(reader.frame(), (b"C", b"print(1)"))
        finally:
            timer.join()


class LimitTest(unittest.TestCase):
    def test_a_frame_over_the_limit_is_refused_from_its_header(self):
        # Only the header is sent: the Reader must refuse it without
        # waiting for a body that would never fit.
        pipe = Pipe(self)
        pipe.write(struct.pack(">cI", b"C", MAX_FRAME + 1))
        pipe.close_write()  # a Reader that waited for the body would see the end
        with self.assertRaises(ProtocolError):
            Reader(pipe.r).frame()

    def test_a_frame_of_the_limit_is_taken(self):
        data = b"y" * MAX_FRAME
        got = frames_sent_by(lambda writer: writer.send(b"C", data))
        self.assertEqual(got, [(b"C", data)])

    def test_a_lower_limit(self):
        pipe = Pipe(self)
        pipe.write(encode(b"F", b"12345") + encode(b"F", b"123456"))
        pipe.close_write()
        reader = Reader(pipe.r)
        self.assertEqual(reader.expect(b"F", 5), b"12345")
        with self.assertRaises(ProtocolError):
            reader.expect(b"F", 5)

    def test_a_length_of_four_gigabytes(self):
        pipe = Pipe(self)
        pipe.write(b"D\xff\xff\xff\xff")
        pipe.close_write()
        with self.assertRaises(ProtocolError):
            Reader(pipe.r).frame()


class WipeTest(unittest.TestCase):
    """What a call sent is zeroed where the launcher lets go of it: every
    call's process inherits the launcher's memory, freed blocks too."""

    def test_bytes_bytearray_and_ascii_text_are_zeroed_in_place(self):
        made = ("secret-%d" % 7).encode()  # made here: no constant of the code's
        text = "secret-%d" % 7
        array = bytearray(made)
        for data in (made, text, array):
            frames.wipe(data)
        self.assertEqual(made, bytes(8))
        self.assertEqual(text, "\0" * 8)
        self.assertEqual(array, bytes(8))

    def test_shared_and_wide_objects_are_left(self):
        one, wide = bytes([120]), "s\u00e9cret-%d" % 7
        frames.wipe(one)  # CPython's one b"x": zeroed, every b"x" would be
        frames.wipe(wide)
        frames.wipe(b"")
        self.assertEqual((one, wide), (b"x", "s\u00e9cret-7"))

    def test_the_reader_zeroes_each_frame_it_hands_on_and_never_moves(self):
        pipe = Pipe(self)
        reader = Reader(pipe.r)
        where = reader.inbox.obj
        secret = ("secret-%d" % 7).encode()
        stream = encode(b"C", secret) + encode(b"I", secret)
        for cut in (3, len(stream)):  # a frame cut, then whole
            pipe.write(stream[:cut])
            stream = stream[cut:]
            self.assertTrue(reader.fill())
        self.assertEqual(reader.next_ready(), (b"C", secret))
        self.assertEqual(bytes(reader.buffer).count(secret), 1)
        self.assertEqual(reader.next_ready(), (b"I", secret))
        self.assertNotIn(secret, bytes(reader.buffer))
        self.assertIs(reader.inbox.obj, where)
        self.assertEqual(len(reader.buffer), 2 * (MAX_FRAME + frames.HEADER))

    def test_send_read_sends_what_it_read_and_zeroes_it(self):
        source, out = Pipe(self), Pipe(self)
        secret = ("secret-%d" % 7).encode()
        source.write(secret * 3)
        writer = frames.Writer(out.w)
        self.assertEqual(writer.send_read(b"D", source.r, 2 * len(secret)), 2 * len(secret))
        self.assertEqual(os.read(out.r, 100), encode(b"D", secret * 2))
        self.assertFalse(any(writer.read))
        source.close_write()
        self.assertEqual(writer.send_read(b"D", source.r), len(secret))
        self.assertEqual(writer.send_read(b"D", source.r), 0)  # its end: nothing sent
        self.assertEqual(os.read(out.r, 100), encode(b"D", secret))

    def test_drop_zeroes_what_the_inbox_held(self):
        pipe = Pipe(self)
        reader = Reader(pipe.r)
        pipe.write(encode(b"I", ("secret-%d" % 7).encode())[:9])
        self.assertTrue(reader.fill())
        reader.drop()
        self.assertEqual((reader.inbox, reader.buffer.count(0)), (b"", len(reader.buffer)))

    def test_a_full_inbox_holds_a_whole_frame_and_reads_no_more(self):
        pipe = Pipe(self)
        reader = Reader(pipe.r)
        sent = [(b"D", bytes([i]) * MAX_FRAME) for i in range(3)]
        writer = threading.Thread(target=lambda: pipe.write(b"".join(encode(k, d)
                                                                     for k, d in sent)))
        writer.start()
        try:
            while reader.fill():
                pass
            self.assertEqual(reader.next_ready(), sent[0])
            got = [sent[0]] + [reader.frame() for _ in sent[1:]]
        finally:
            writer.join()
        self.assertEqual(got, sent)


class EndTest(unittest.TestCase):
    def test_none_at_the_end_of_an_empty_stream(self):
        pipe = Pipe(self)
        pipe.close_write()
        reader = Reader(pipe.r)
        self.assertIsNone(reader.frame())
        self.assertTrue(reader.ended)
        self.assertIsNone(reader.frame())  # again, without blocking

    def test_none_after_the_last_whole_frame(self):
        pipe = Pipe(self)
        pipe.write(encode(b"O", b"out"))
        pipe.close_write()
        reader = Reader(pipe.r)
        self.assertEqual(reader.frame(), (b"O", b"out"))
        self.assertIsNone(reader.frame())

    def test_none_when_the_stream_ends_inside_a_frame(self):
        for cut in (1, frames.HEADER - 1, frames.HEADER, frames.HEADER + 2):
            with self.subTest(cut=cut):
                pipe = Pipe(self)
                pipe.write(encode(b"C", b"abcdef")[:cut])
                pipe.close_write()
                self.assertIsNone(Reader(pipe.r).frame())

    def test_fill_on_a_nonblocking_pipe_with_nothing_there(self):
        pipe = Pipe(self)
        os.set_blocking(pipe.r, False)
        reader = Reader(pipe.r)
        self.assertFalse(reader.fill())
        self.assertFalse(reader.ended)


class ExpectTest(unittest.TestCase):
    def test_the_kind_that_was_due(self):
        pipe = Pipe(self)
        pipe.write(encode(b"L", b"{}") + encode(b"A", b"x\0"))
        pipe.close_write()
        reader = Reader(pipe.r)
        self.assertEqual(reader.expect(b"L"), b"{}")
        self.assertEqual(reader.expect(b"A"), b"x\0")

    def test_another_kind_raises(self):
        pipe = Pipe(self)
        pipe.write(encode(b"C", b"code"))
        pipe.close_write()
        with self.assertRaises(ProtocolError):
            Reader(pipe.r).expect(b"A")

    def test_none_at_the_end(self):
        pipe = Pipe(self)
        pipe.close_write()
        self.assertIsNone(Reader(pipe.r).expect(b"A"))


if __name__ == "__main__":
    unittest.main()
