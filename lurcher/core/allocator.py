"""The process's allocator settings for buffers of a batch's size (glibc ``mallopt``).

Owns ``return_large_buffers_to_the_kernel``, called once at start by the server (its forked
shards inherit it) and by each ``lurcher-bench`` actor process, so the clients measured
beside the server allocate the way it does. Invariant: a no-op where the C library has no
``mallopt``.
"""

from __future__ import annotations

import ctypes

# glibc raises its mmap threshold each time a large block is freed (up to 32 MiB), after which
# 16 MiB poll replies come from the heap and their pages stay resident after use. A fixed
# threshold keeps batch-sized buffers (<= 4 MiB) on the fast heap and returns anything larger
# to the kernel when freed, so the server's memory follows what is really in flight.
# Setting the threshold also freezes glibc's trim threshold at 128 KiB, so freeing a
# request-sized buffer at the top of the heap gave the memory back (brk) and the next request
# took it again (brk, page faults): one round trip to the kernel per request. The heap now
# keeps up to TRIM_THRESHOLD_BYTES free at its top and grows by TOP_PAD_BYTES at a time: the
# memory a shard holds beyond what is in use is bounded by that figure.
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
MMAP_THRESHOLD_BYTES = 4 * 1024 * 1024
TRIM_THRESHOLD_BYTES = 16 * 1024 * 1024
TOP_PAD_BYTES = 2 * 1024 * 1024


def return_large_buffers_to_the_kernel() -> None:
    """Fix glibc's mmap and trim thresholds and top pad (inherited by forked shards); a
    no-op elsewhere."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
        libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
        libc.mallopt(M_TOP_PAD, TOP_PAD_BYTES)
    except (OSError, AttributeError):
        pass  # not glibc: large buffers follow the allocator's defaults
