"""``system.segment.page_cache_window`` on a real server: a partition that grows past its
window has its older log bytes handed back to the kernel (not in the page cache), its newest
window stays cached, and every message is still there, exact, after a read of the history
and after a crash; the start-up log names the window "auto" resolved to."""

from __future__ import annotations

import mmap
import time
from pathlib import Path

from lurcher.core.log.host_memory import auto_page_cache_window, free_page_reporting
from tests.support import raw
from tests.support.page_cache import require_disk_file_system, resident_pages
from tests.support.server import ServerFactory

WINDOW = 1024 * 1024
BATCHES, PER_BATCH, SIZE = 160, 64, 1000


def payload(i: int) -> bytes:
    return f"message {i}:".encode().ljust(SIZE, bytes([65 + i % 26]))


def segment_log(data_dir: Path) -> str:
    logs = [p for p in data_dir.rglob("*.log") if "partitions" in p.parts]
    assert len(logs) == 1, logs
    return str(logs[0])


def old_pages_cached(path: str) -> tuple[int, int]:
    resident = resident_pages(path)
    old = resident[:len(resident) - 2 * WINDOW // mmap.PAGESIZE]
    return sum(old), len(old)


def wait_until_evicted(path: str, fraction: float) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        cached, total = old_pages_cached(path)
        if cached <= total * fraction:
            return
        time.sleep(0.1)
    raise AssertionError(f"{cached} of {total} pages older than the window still cached")


def read_everything(address: str) -> list[bytes]:
    got: list[bytes] = []
    with raw.RawClient(address, timeout_s=30) as c:
        c.login()
        while len(got) < BATCHES * PER_BATCH:
            polled = c.poll("cached", "t", 0, value=len(got), count=500).messages
            assert polled, f"poll from {len(got)} returned nothing"
            got += [m.payload for m in polled]
    return got


def test_a_growing_partition_keeps_only_its_window_cached(tmp_path,
                                                           server_factory: ServerFactory):
    require_disk_file_system(str(tmp_path))
    server = server_factory({"LURCHER_SYSTEM_SEGMENT_PAGE_CACHE_WINDOW": "1 MiB"})
    raw.fill_partition(server.tcp_address, "cached", "t", ([payload(b * PER_BATCH + i)
                                                            for i in range(PER_BATCH)]
                                                           for b in range(BATCHES)))
    assert server.data_dir is not None
    path = segment_log(server.data_dir)
    wait_until_evicted(path, 0.05)
    assert all(resident_pages(path)[-(WINDOW // 2) // mmap.PAGESIZE:]), "newest bytes evicted"
    expected = [payload(i) for i in range(BATCHES * PER_BATCH)]
    assert read_everything(server.tcp_address) == expected
    # the history just read went back too (read-behind); pages the kernel was still reading
    # ahead when their range was evicted stay (about 8% here, all of it without read-behind)
    wait_until_evicted(path, 0.25)
    server.restart(crash=True)
    assert read_everything(server.tcp_address) == expected


def test_a_poll_of_evicted_history_does_not_hold_up_other_connections(
        tmp_path, server_factory: ServerFactory):
    """A poll of history no longer in the page cache is read in on the reader thread (here
    made slow: ``TEST_LURCHER_HISTORY_READ_DELAY_S``): another connection's requests are
    answered meanwhile, the poll's answer comes after them, whole and exact, and a poll of
    the newest bytes is not held up either."""
    require_disk_file_system(str(tmp_path))
    server = server_factory({"LURCHER_SYSTEM_SEGMENT_PAGE_CACHE_WINDOW": "1 MiB",
                             "TEST_LURCHER_HISTORY_READ_DELAY_S": "3"})
    raw.fill_partition(server.tcp_address, "cached", "t", ([payload(b * PER_BATCH + i)
                                                            for i in range(PER_BATCH)]
                                                           for b in range(BATCHES)))
    assert server.data_dir is not None
    wait_until_evicted(segment_log(server.data_dir), 0.05)
    with raw.RawClient(server.tcp_address, timeout_s=30) as reader, \
            raw.RawClient(server.tcp_address, timeout_s=30) as other:
        reader.login()
        other.login()
        reader.send_frame(raw.POLL_MESSAGES, raw.poll_payload("cached", "t", 0,
                                                              raw.STRATEGY_OFFSET, 0, 500))
        time.sleep(0.3)  # the poll is in the server, its history being read in
        other.ping()
        newest = other.poll("cached", "t", 0, value=BATCHES * PER_BATCH - 10, count=10)
        assert [m.payload for m in newest.messages] == \
            [payload(i) for i in range(BATCHES * PER_BATCH - 10, BATCHES * PER_BATCH)]
        assert not reader.closed_by_peer(0.1), "the reader's connection was closed"
        response = reader.read_response(timeout_s=30)  # not sent before the others
    assert response.status == 0
    assert [m.payload for m in raw.parse_poll(response.payload).messages] == \
        [payload(i) for i in range(500)]


def test_the_start_up_log_says_which_window_auto_picked(server_factory: ServerFactory):
    """The packaged default is "auto": the server's log names the window it resolved to on
    this machine (256 MiB where the VM reports free pages, else 1 GiB), and a size set in
    the environment is the one in force."""
    expected = auto_page_cache_window() // (1024 * 1024)
    server = server_factory()
    assert f"keeps its newest {expected} MiB in the page cache" in server.output_path.read_text()
    reporting = "this VM hands freed memory back to its host" in server.output_path.read_text()
    assert reporting == bool(free_page_reporting())
    server = server_factory({"LURCHER_SYSTEM_SEGMENT_PAGE_CACHE_WINDOW": "3 MiB"})
    assert "keeps its newest 3 MiB in the page cache" in server.output_path.read_text()
    server = server_factory({"LURCHER_SYSTEM_SEGMENT_PAGE_CACHE_WINDOW": "0"})
    assert "drop-behind off" in server.output_path.read_text()
