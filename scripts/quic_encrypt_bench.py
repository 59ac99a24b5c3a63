"""Time ``LeanCryptoContext.encrypt_parts`` per packet (AES-128-GCM), best of 5 x 2,000.

Run from a checkout: ``PYTHONPATH=. python scripts/quic_encrypt_bench.py``; put another
checkout on ``PYTHONPATH`` to time its version the same way. The payload is a STREAM frame's
header and a slice of a larger buffer, as the packet builder hands them over.
"""

from __future__ import annotations

import os
import time

from aioquic import tls

from lurcher.core.quic_crypto import LeanCryptoContext

SIZES = (64_000, 8_000, 1_150)
ROUNDS, PACKETS = 5, 2_000
SHORT_HEADER = bytes([0x41]) + bytes(range(8)) + bytes([0x12, 0x34])
FRAME_HEADER = b"\x0a\x00\x80\x00\xfa\x00"


def best_us(context: LeanCryptoContext, data: memoryview, size: int) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for number in range(PACKETS):
            at = number * 7 % 1_000
            context.encrypt_parts(SHORT_HEADER, [FRAME_HEADER, data[at:at + size]], number)
        best = min(best, (time.perf_counter() - started) / PACKETS * 1e6)
    return best


def main() -> None:
    context = LeanCryptoContext()
    context.setup(cipher_suite=tls.CipherSuite.AES_128_GCM_SHA256, secret=bytes(range(32)),
                  version=1)
    data = memoryview(os.urandom(max(SIZES) + 1_000))
    for size in SIZES:
        print(f"{size:>7,} bytes: {best_us(context, data, size):6.2f} us a packet")


if __name__ == "__main__":
    main()
