"""Read a server's partition files directly, to check what is on disk after a crash.

Layout assumed (wire reference §17, DESIGN "on-disk record format IS the wire format"):
each partition directory holds segments ``<20-digit start offset>.log`` (messages back to
back, exactly as polled; while an O_DIRECT server has them open, followed by zeros up to a
multiple of 4096 bytes, which the readers here check and skip) and ``<same>.index``
(16-byte entries: relative offset u32, end position u32, timestamp u64). ``read_partition`` raises ``ValueError`` naming the file
and byte position of the first inconsistency (torn record, offset gap, index mismatch).
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

import xxhash

from tests.support.raw import PolledMessage, message, parse_messages

SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
INDEX_ENTRY = struct.Struct("<IIQ")
BLOCK = 4096  # O_DIRECT segment files are padded with zeros up to a multiple of it


def partition_dirs(data_dir: Path) -> list[Path]:
    """Every directory under ``data_dir`` holding at least one segment ``.log`` file."""
    return sorted({p.parent for p in data_dir.rglob("*.log") if SEGMENT_NAME.match(p.name)})


def segments(partition_dir: Path) -> list[Path]:
    """The segment logs of one partition, oldest first."""
    return sorted(p for p in partition_dir.iterdir() if SEGMENT_NAME.match(p.name))


def blocks_past_end(path: Path) -> int:
    """Bytes of disk blocks the file holds past its last 4 KiB block (a reservation made
    with fallocate KEEP_SIZE, plus any metadata blocks of the file system)."""
    st = os.stat(path)
    return st.st_blocks * 512 - -(-st.st_size // 4096) * 4096


def read_segment(log_path: Path) -> list[PolledMessage]:
    """All messages of one segment; ValueError on a torn tail or offset gap inside it."""
    start = int(SEGMENT_NAME.match(log_path.name).group(1))  # type: ignore[union-attr]
    data = log_path.read_bytes()
    data = unpadded(data, log_end(data))
    try:
        messages = parse_messages(data)
    except ValueError as exc:
        raise ValueError(f"{log_path}: {exc}") from None
    for i, m in enumerate(messages):
        if m.offset != start + i:
            raise ValueError(f"{log_path}: message {i} has offset {m.offset}, expected {start + i}")
    return messages


def log_end(data: bytes) -> int:
    """Where the whole records at the start of a segment log end (a run of zeros, which
    parses as empty records, is padding, not records)."""
    end = 0
    for m in parse_messages(data, strict=False):
        if not any(m.raw):
            break
        end += len(m.raw)
    return end


def index_end(data: bytes) -> int:
    """Where the last index entry that is not all zeros ends."""
    count = len(data) // INDEX_ENTRY.size
    while count and not any(data[(count - 1) * INDEX_ENTRY.size:count * INDEX_ENTRY.size]):
        count -= 1
    return count * INDEX_ENTRY.size


def unpadded(data: bytes, end: int) -> bytes:
    """``data[:end]`` when what follows ``end`` is the block padding of a segment file open
    O_DIRECT (zeros, less than a block, up to a multiple of ``BLOCK``); else ``data``."""
    rest = len(data) - end
    if 0 < rest < BLOCK and len(data) % BLOCK == 0 and not any(data[end:]):
        return data[:end]
    return data


def check_index(log_path: Path, messages: list[PolledMessage], start: int) -> None:
    """If ``<segment>.index`` exists, its entries must describe ``messages`` exactly."""
    index_path = log_path.with_suffix(".index")
    if not index_path.exists():
        return
    data = index_path.read_bytes()
    data = unpadded(data, index_end(data))
    if len(data) % INDEX_ENTRY.size:
        raise ValueError(f"{index_path}: size {len(data)} is not a multiple of 16")
    entries = list(INDEX_ENTRY.iter_unpack(data))
    if len(entries) != len(messages):
        raise ValueError(f"{index_path}: {len(entries)} entries for {len(messages)} messages")
    end = 0
    for i, ((rel, pos, ts), m) in enumerate(zip(entries, messages)):
        end += len(m.raw)
        if (rel, pos, ts) != (m.offset - start, end, m.timestamp):
            raise ValueError(f"{index_path}: entry {i} is {(rel, pos, ts)}, "
                             f"expected {(m.offset - start, end, m.timestamp)}")


def read_partition(partition_dir: Path, *, with_index: bool = True) -> list[PolledMessage]:
    """Every message of a partition across its segments; offsets dense from the first one."""
    out: list[PolledMessage] = []
    for log_path in segments(partition_dir):
        start = int(SEGMENT_NAME.match(log_path.name).group(1))  # type: ignore[union-attr]
        if out and start != out[-1].offset + 1:
            raise ValueError(f"{log_path}: starts at {start}, previous segment ended at {out[-1].offset}")
        messages = read_segment(log_path)
        if with_index:
            check_index(log_path, messages, start)
        out.extend(messages)
    return out


def whole_messages(log_path: Path) -> tuple[list[PolledMessage], bool]:
    """The whole records of a segment log, and whether they fill the file (no torn tail)."""
    data = log_path.read_bytes()
    messages = parse_messages(data, strict=False)
    return messages, sum(len(m.raw) for m in messages) == len(data)


def stored_record(payload: bytes, message_id: int, offset: int, timestamp: int) -> bytes:
    """A record as the server stores it (offset, timestamp and checksum filled in)."""
    record = message(payload, message_id=message_id, offset=offset, timestamp=timestamp)
    return xxhash.xxh3_64_intdigest(record[8:]).to_bytes(8, "little") + record[8:]


def append_unindexed_batch(log_path: Path, payloads: list[bytes], message_id: int) -> bool:
    """Append ``payloads`` as whole records of one new batch (next offsets, a timestamp past
    the last one) with no index entries: what a kill tearing a batch's log write at a record
    boundary leaves. Ids are ``message_id + i``. False (nothing written) when the log
    already ends in a torn record."""
    messages, clean = whole_messages(log_path)
    if not clean:
        return False
    offset = messages[-1].offset + 1 if messages else int(log_path.stem)
    timestamp = (messages[-1].timestamp if messages else 1) + 1
    with open(log_path, "ab") as f:
        for i, payload in enumerate(payloads):
            f.write(stored_record(payload, message_id + i, offset + i, timestamp))
    return True


def drop_block_padding(log_path: Path) -> None:
    """Cut the zeros an O_DIRECT server (``system.segment.direct_io``) killed while running
    leaves after the real end of a segment's log and index (see ``unpadded``), as recovery
    would, so damage appended next lands at the real end."""
    for path, end_of in ((log_path, log_end), (log_path.with_suffix(".index"), index_end)):
        if path.exists():
            data = path.read_bytes()
            real = unpadded(data, end_of(data))
            if len(real) < len(data):
                os.truncate(path, len(real))
