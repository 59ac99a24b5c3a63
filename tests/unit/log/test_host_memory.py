"""``lurcher.core.log.host_memory``: free page reporting read from a virtio sysfs tree, and
the drop-behind window ``page_cache_window = "auto"`` picks from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from lurcher.core.log.host_memory import WINDOW_ELSEWHERE, WINDOW_REPORTING, \
    auto_page_cache_window, free_page_reporting, parse_page_cache_window
from lurcher.core.wire.units import U64_MAX


def _device(root: Path, name: str, device_id: str, features: str) -> None:
    d = root / name
    d.mkdir(parents=True)
    (d / "device").write_text(device_id + "\n")
    (d / "features").write_text(features + "\n")


def _reporting_balloon(root: Path) -> Path:
    _device(root, "virtio1", "0x0002", "0" * 5 + "1" + "0" * 58)  # a block device
    _device(root, "virtio0", "0x0005", "01100101" + "0" * 56)
    return root


def _balloon_without_reporting(root: Path) -> Path:
    _device(root, "virtio0", "0x0005", "01100001" + "0" * 56)
    _device(root, "virtio1", "0x0002", "0" * 5 + "1" + "0" * 58)
    return root


def test_a_balloon_with_bit_5_reports_free_pages(tmp_path: Path) -> None:
    assert free_page_reporting(_reporting_balloon(tmp_path)) is True


def test_a_balloon_without_bit_5_or_no_balloon_does_not(tmp_path: Path) -> None:
    assert free_page_reporting(_balloon_without_reporting(tmp_path)) is False
    assert free_page_reporting(tmp_path / "virtio1" / "none") is None  # no virtio bus


def test_unreadable_entries_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "virtio0").mkdir()  # no device file
    _device(tmp_path, "virtio1", "junk", "1" * 64)
    assert free_page_reporting(tmp_path) is False


def test_auto_is_the_small_window_only_where_free_pages_are_reported(tmp_path: Path) -> None:
    assert auto_page_cache_window(_reporting_balloon(tmp_path / "vm")) == 256 * 1024 * 1024
    assert auto_page_cache_window(_balloon_without_reporting(tmp_path / "kept")) == 1 << 30
    assert auto_page_cache_window(tmp_path / "no-virtio") == WINDOW_ELSEWHERE


@pytest.mark.parametrize("text", ["auto", "AUTO", " Auto "])
def test_auto_is_read_in_any_case(tmp_path: Path, text: str) -> None:
    assert parse_page_cache_window(text, _reporting_balloon(tmp_path)) == WINDOW_REPORTING


def test_a_size_is_kept_whatever_the_machine(tmp_path: Path) -> None:
    vm = _reporting_balloon(tmp_path)
    assert parse_page_cache_window("64 MiB", vm) == 64 * 1024 * 1024
    assert parse_page_cache_window(0, vm) == 0
    assert parse_page_cache_window("unlimited", vm) == U64_MAX


@pytest.mark.parametrize("value", ["automatic", "fast", "-1 MiB"])
def test_anything_else_is_refused_naming_auto(value: str) -> None:
    with pytest.raises(ValueError, match=r"or \"auto\""):
        parse_page_cache_window(value)
