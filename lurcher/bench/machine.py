"""What the bench records about the machine beyond ``platform``: whether its free memory is
handed back to a hypervisor.

A VM whose virtio balloon has free page reporting (``VIRTIO_BALLOON_F_REPORTING``) tells its
host which guest pages are free, and the host takes them back; the guest's next use of such
a page faults in the host. Page-cache writes into freshly freed memory then cost several
times the copy (README, Performance, drop-behind), so runs on such a machine vary with what
ran before them. ``free_page_reporting`` reads the virtio devices' feature bits from sysfs:
True or False (no balloon, or one without reporting: also a kernel with virtio built in on
bare metal), or None where ``/sys/bus/virtio`` is missing (a kernel without virtio).
Reading never raises.
"""

from __future__ import annotations

from pathlib import Path

VIRTIO_DEVICES = Path("/sys/bus/virtio/devices")
BALLOON_DEVICE_ID = 0x0005
BALLOON_F_REPORTING = 5  # bit of the device's ``features`` (a string of 0/1, bit 0 first)
REPORTING_NOTE = ("machine: a VM that reports free memory to its host (virtio balloon free "
                  "page reporting); writes into freshly freed memory are slower and vary "
                  "from run to run, see README, Performance, drop-behind")


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
