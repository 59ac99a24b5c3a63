"""``lurcher.bench.machine``: free page reporting read from a virtio sysfs tree, and the
note the run's table carries when the machine has it."""

from __future__ import annotations

from pathlib import Path

from lurcher.bench.machine import REPORTING_NOTE, free_page_reporting
from lurcher.bench.report import table


def _device(root: Path, name: str, device_id: str, features: str) -> None:
    d = root / name
    d.mkdir(parents=True)
    (d / "device").write_text(device_id + "\n")
    (d / "features").write_text(features + "\n")


def test_a_balloon_with_bit_5_reports_free_pages(tmp_path: Path) -> None:
    _device(tmp_path, "virtio1", "0x0002", "0" * 5 + "1" + "0" * 58)  # a block device
    _device(tmp_path, "virtio0", "0x0005", "01100101" + "0" * 56)
    assert free_page_reporting(tmp_path) is True


def test_a_balloon_without_bit_5_or_no_balloon_does_not(tmp_path: Path) -> None:
    _device(tmp_path, "virtio0", "0x0005", "01100001" + "0" * 56)
    _device(tmp_path, "virtio1", "0x0002", "0" * 5 + "1" + "0" * 58)
    assert free_page_reporting(tmp_path) is False
    assert free_page_reporting(tmp_path / "virtio1" / "none") is None  # no virtio bus


def test_unreadable_entries_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "virtio0").mkdir()  # no device file
    _device(tmp_path, "virtio1", "junk", "1" * 64)
    assert free_page_reporting(tmp_path) is False


def _doc(host: dict) -> dict:
    params = {"message_batches": 1, "duration_s": None, "transport": "tcp",
              "message_size": 1, "messages_per_batch": 1}
    return {"params": params, "workload": "pinned-producer", "target": "lurcher",
            "server": {}, "actors": [], "groups": [], "host": host}


def test_the_table_notes_a_machine_that_reports_free_pages() -> None:
    assert REPORTING_NOTE in table(_doc({"free_page_reporting": True}))
    assert REPORTING_NOTE not in table(_doc({"free_page_reporting": False}))
    assert REPORTING_NOTE not in table(_doc({}))
