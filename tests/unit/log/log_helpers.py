"""Helpers for the storage tests: a manual clock, batches, recording, failing and holding
I/O backends."""

from __future__ import annotations

import asyncio
import os
import struct
import time

import xxhash

from lurcher.core.log import PosixIo
from lurcher.core.log.direct import BLOCK
from lurcher.core.wire.batch import MessageBatch


class ManualClock:
    def __init__(self, now_us: int = 1_000_000) -> None:
        self.now_us = now_us

    def __call__(self) -> int:
        return self.now_us


class RecordingIo(PosixIo):
    """PosixIo that counts calls per operation."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def pwrite(self, fd, data, position):
        self._count("pwrite")
        return super().pwrite(fd, data, position)

    def fsync(self, fd):
        self._count("fsync")
        super().fsync(fd)

    def start_writeback(self, fd):
        self._count("start_writeback")
        super().start_writeback(fd)


class HeldIo(PosixIo):
    """Writes each submitted pair at once but reports completions only when the test says
    (``complete(i, error)``), in any order."""

    def __init__(self) -> None:
        self.submitted: list = []

    def submit_pair(self, log_fd, blob, log_position, index_fd, entries, index_position, done,
                    reserve=None, writeback=False):
        self.append_pair(log_fd, blob, log_position, index_fd, entries, index_position, False)
        self.submitted.append(done)

    def complete(self, i: int, error: OSError | None = None) -> None:
        self.submitted[i](error)


class FailingIo(PosixIo):
    """PosixIo whose pwrite fails (after writing half) while ``fail`` is set."""

    fail = False

    def pwrite(self, fd, data, position):
        if self.fail:
            view = memoryview(data)
            super().pwrite(fd, view[:len(view) // 2], position)
            raise OSError(28, "No space left on device")
        return super().pwrite(fd, data, position)


PAYLOAD_BYTES = 10
MESSAGE_BYTES = 64 + PAYLOAD_BYTES


def batch(n: int, tag: int = 0, size: int = PAYLOAD_BYTES) -> MessageBatch:
    """``n`` messages; message i's payload is ``size`` bytes of (tag + i) % 256."""
    payloads = [bytes([(tag + i) % 256]) * size for i in range(n)]
    return MessageBatch.build(payloads, origin_timestamp_us=42).writable()


STORED_HEADER = struct.Struct("<Q16sQQQIIQ")


def messages(raw: bytes) -> list[tuple[int, int, bytes]]:
    """(offset, timestamp, payload) of each stored message in ``raw``, checking checksums."""
    out, p = [], 0
    while p < len(raw):
        checksum, _, offset, ts, _, uh, pl, _ = STORED_HEADER.unpack_from(raw, p)
        end = p + 64 + pl + uh
        assert checksum == xxhash.xxh3_64_intdigest(raw[p + 8:end])
        out.append((offset, ts, raw[p + 64:p + 64 + pl]))
        p = end
    assert p == len(raw)
    return out


OPEN_DIRECT: list = []  # the DirectIo backends of the running test (see conftest)


def read_file(directory: str, name: str) -> bytes:
    """The file's bytes; for a segment file open O_DIRECT, its logical bytes, after checking
    that what follows them on disk is block padding (zeros, less than a block)."""
    path = os.path.join(directory, name)
    with open(path, "rb") as f:
        data = f.read()
    for io in OPEN_DIRECT:
        end = io.logical_size(path)
        if end is not None:
            assert data[end:] == bytes(len(data) - end) and len(data) - end < BLOCK
            return data[:end]
    return data


def write_file(directory: str, name: str, data: bytes) -> None:
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def wait_evictor_idle(evictor) -> None:
    """Return once the drop-behind thread has handled every job queued so far (30 s at most)."""
    evictor.submit([], writeback=False).wait(30)


def fill_evicting(part, batches: int) -> None:
    """Append as the server does (``append_async`` on an event loop), then give the eviction
    jobs' follow-ups, which run on that loop, time to finish: no job in flight three looks
    in a row (at most 30 s)."""
    async def run() -> None:
        for i in range(batches):
            written = part.append_async(MessageBatch.build([bytes([i % 251]) * 1000] * 64)
                                        .writable())
            if written is not None:
                await written
        quiet, deadline = 0, time.monotonic() + 30
        while quiet < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            quiet = 0 if part.cache_window.busy else quiet + 1
    asyncio.run(run())
