"""Both I/O backends store the bytes appended, with and without fsync; io selection."""

import os

import pytest
from log_helpers import messages

from lurcher.core.log.config import LogConfig
from lurcher.core.log.io import PosixIo, select_io
from lurcher.core.log.partition import Partition
from lurcher.core.log.uring import UringIo, open_uring_io
from lurcher.core.wire.batch import MessageBatch

URING = open_uring_io()


# This project's machines run kernels with io_uring; a machine without it fails here loudly
# (the fallback itself is covered by test_select_io_modes).
BACKENDS = [pytest.param(PosixIo(), id="posix"), pytest.param(URING, id="uring")]


def batch(n: int, tag: bytes) -> MessageBatch:
    return MessageBatch.build([tag + bytes([i]) * 100 for i in range(n)]).writable()


@pytest.mark.parametrize("io", BACKENDS)
@pytest.mark.parametrize("fsync", [False, True])
def test_append_and_read_back_identical_bytes(tmp_path, io, fsync):
    config = LogConfig(segment_size_bytes=16 * 1024, enforce_fsync=fsync)
    part = Partition.open(str(tmp_path / "p"), 0, config, io=io)
    for round_ in range(10):
        part.append(batch(50, bytes([round_])))
    polled = part.read_offset(0, 10_000)
    assert polled.count == 500 and part.segments_count > 1
    data = polled.to_bytes()
    assert [m[2] for m in messages(data)] == [bytes([r]) + bytes([i]) * 100
                                               for r in range(10) for i in range(50)]
    part.close()
    reopened = Partition.open(str(tmp_path / "p"), 0, config, io=PosixIo())
    assert reopened.read_offset(0, 10_000).to_bytes() == data
    reopened.close()


@pytest.mark.parametrize("io", BACKENDS)
def test_append_pair_writes_both_files(tmp_path, io):
    log_fd = io.open(str(tmp_path / "a.log"))
    index_fd = io.open(str(tmp_path / "a.index"))
    io.append_pair(log_fd, b"x" * 5000, 0, index_fd, b"y" * 16, 0, fsync=True)
    io.append_pair(log_fd, bytearray(b"z" * 10), 5000, index_fd, memoryview(b"w" * 16), 16,
                   fsync=False)
    assert io.pread(log_fd, 6000, 0) == b"x" * 5000 + b"z" * 10
    window = memoryview(bytearray(7))
    assert io.preadinto(log_fd, window, 4998) == 7 and bytes(window) == b"xxzzzzz"
    assert io.pread(index_fd, 100, 0) == b"y" * 16 + b"w" * 16
    io.close(log_fd)
    io.close(index_fd)


@pytest.mark.parametrize("io", BACKENDS)
def test_write_errors_raise_oserror(tmp_path, io):
    fd = os.open(str(tmp_path / "ro"), os.O_RDONLY | os.O_CREAT)
    with pytest.raises(OSError):
        io.pwrite(fd, b"data", 0)
    os.close(fd)


def test_select_io_modes():
    assert isinstance(select_io("posix"), PosixIo)
    auto = select_io("auto")
    assert isinstance(auto, UringIo) == (URING is not None)
    with pytest.raises(ValueError, match="system.io"):
        select_io("fast")


@pytest.mark.parametrize("io", BACKENDS)
@pytest.mark.parametrize("fsync", [False, True])
def test_index_entries_are_not_written_when_the_log_write_fails(tmp_path, io, fsync):
    """The index entries are a batch's commit record: they go to disk only after the log
    bytes (io_uring links the two writes), so a failed log write leaves no entries."""
    log_path, index_path = tmp_path / "x.log", tmp_path / "x.index"
    log_path.write_bytes(b"")
    read_only_log = os.open(log_path, os.O_RDONLY)
    index_fd = io.open(str(index_path))
    try:
        with pytest.raises(OSError):
            io.append_pair(read_only_log, b"m" * 4096, 0, index_fd, b"e" * 16, 0, fsync)
    finally:
        os.close(read_only_log)
        io.close(index_fd)
    assert index_path.read_bytes() == b""


async def test_a_writer_thread_job_that_fails_with_a_bug_fails_alone():
    """A job raising something other than OSError (a bug) is reported to its caller as an
    EIO OSError and the thread goes on with the next job (it would otherwise die and leave
    every later write or fsync waiting forever)."""
    import asyncio
    import errno

    from lurcher.core.log.io import WriterThread

    thread = WriterThread("test-writer")
    loop = asyncio.get_running_loop()
    outcomes = [loop.create_future(), loop.create_future()]
    ran = []

    def broken() -> None:
        raise ValueError("planted")

    thread.run(broken, outcomes[0].set_result)
    thread.run(lambda: ran.append(True), outcomes[1].set_result)
    failed, fine = await asyncio.wait_for(asyncio.gather(*outcomes), 10)
    assert isinstance(failed, OSError) and failed.errno == errno.EIO
    assert "planted" in str(failed)
    assert fine is None and ran == [True]


async def test_a_writer_thread_that_could_not_start_is_started_by_the_next_job(monkeypatch):
    import asyncio
    import threading

    from lurcher.core.log.io import WriterThread

    thread = WriterThread("test-start")
    plain_start = threading.Thread.start

    def no_thread(self) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", no_thread)
    with pytest.raises(RuntimeError):
        thread.run(lambda: None, lambda error: None)
    monkeypatch.setattr(threading.Thread, "start", plain_start)
    done = asyncio.get_running_loop().create_future()
    thread.run(lambda: None, done.set_result)  # not queued for a thread that never ran
    assert await asyncio.wait_for(done, 10) is None


async def test_a_writer_thread_drains_what_was_queued_before_and_says_when_it_cannot() -> None:
    import threading

    from lurcher.core.log.io import WriterThread

    thread = WriterThread("test-drain")
    assert thread.drain(0.01)  # no thread yet: nothing queued
    release, ran = threading.Event(), []
    thread.run(lambda: release.wait(10), lambda error: None)
    thread.run(lambda: ran.append(1), lambda error: None)
    assert not thread.drain(0.05) and ran == []  # the first job still holds the thread
    threading.Timer(0.1, release.set).start()
    assert thread.drain(10) and ran == [1]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
async def test_a_dead_writer_thread_does_not_claim_its_queue_drained() -> None:
    import threading

    from lurcher.core.log.io import WriterThread

    thread = WriterThread("test-dead")
    release = threading.Event()

    def dies() -> None:
        release.wait(10)
        raise SystemExit  # not an Exception: the thread ends

    thread.run(dies, lambda error: None)
    thread.run(lambda: None, lambda error: None)  # never runs
    release.set()
    thread._thread.join(10)
    assert not thread.drain(0.05)
