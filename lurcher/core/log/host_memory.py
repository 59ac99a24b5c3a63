"""Whether this machine's free memory is handed back to a hypervisor, and the drop-behind
window ``system.segment.page_cache_window = "auto"`` picks from it.

A VM whose virtio balloon has free page reporting (``VIRTIO_BALLOON_F_REPORTING``) tells its
host which guest pages are free, and the host takes them back; the guest's next use of such
a page faults in the host. Page-cache writes into freshly freed memory then cost several
times the copy (README, Performance, drop-behind), so a small window, whose writes reuse the
pages it has just evicted, pays there; elsewhere a larger one serves consumers that read
behind their producers from memory. ``free_page_reporting`` reads the virtio devices' feature
bits from sysfs: True or False (no balloon, or one without reporting: also a kernel with
virtio built in on bare metal), or None where ``/sys/bus/virtio`` is missing (a kernel
without virtio). Reading never raises. The bench records the same fact about its host.
Invariant: "auto" resolves to one of the two windows below, and the same one on every read
of the same machine.
"""

from __future__ import annotations

import functools
from pathlib import Path

from lurcher.core.wire import units

VIRTIO_DEVICES = Path("/sys/bus/virtio/devices")
BALLOON_DEVICE_ID = 0x0005
BALLOON_F_REPORTING = 5  # bit of the device's ``features`` (a string of 0/1, bit 0 first)
MIB = 1024 * 1024
WINDOW_REPORTING = 256 * MIB  # "auto" on a VM that reports free pages to its host
WINDOW_ELSEWHERE = 1024 * MIB  # "auto" elsewhere (bare metal, a VM keeping its memory)
AUTO = "auto"


def free_page_reporting(devices: Path = VIRTIO_DEVICES) -> bool | None:
    """True if a virtio balloon on this machine negotiated free page reporting."""
    try:
        entries = list(devices.iterdir())
    except OSError:
        return None
    return any(_reports_free_pages(entry) for entry in entries)


def _reports_free_pages(device: Path) -> bool:
    try:
        if int((device / "device").read_text().strip(), 16) != BALLOON_DEVICE_ID:
            return False
        features = (device / "features").read_text().strip()
    except (OSError, ValueError):
        return False
    return len(features) > BALLOON_F_REPORTING and features[BALLOON_F_REPORTING] == "1"


def auto_page_cache_window(devices: Path = VIRTIO_DEVICES) -> int:
    """The window "auto" means on this machine (see the module doc)."""
    return WINDOW_REPORTING if free_page_reporting(devices) else WINDOW_ELSEWHERE


@functools.cache
def this_machines_window() -> int:
    """``auto_page_cache_window`` of this machine, read once per process (``LogConfig``'s
    default: a partition opened without a configuration does not read sysfs again)."""
    return auto_page_cache_window()


def parse_page_cache_window(value: int | str, devices: Path = VIRTIO_DEVICES) -> int:
    """``page_cache_window`` in bytes: "auto" as ``auto_page_cache_window``, else a size
    ("0" and "unlimited": no window). Raises ValueError for anything else."""
    if isinstance(value, str) and value.strip().lower() == AUTO:
        return auto_page_cache_window(devices)
    try:
        return units.parse_size(value)
    except ValueError as exc:
        raise ValueError(f"{exc}, or \"auto\"") from None


def window_line(window: int, devices: Path = VIRTIO_DEVICES) -> str:
    """The start-up log's line on the drop-behind window in force and this machine."""
    if not window or window == units.U64_MAX:
        kept = "drop-behind off (page_cache_window: the kernel manages the page cache)"
    elif window % MIB:
        kept = f"drop-behind: each partition keeps its newest {window} bytes in the page cache"
    else:
        kept = f"drop-behind: each partition keeps its newest {window // MIB} MiB in the page cache"
    if free_page_reporting(devices):
        return (f"{kept}; this VM hands freed memory back to its host (\"auto\" picks "
                f"{WINDOW_REPORTING // MIB} MiB)")
    return kept
