"""Packet protection of aioquic's 1-RTT packets with fewer copies (``LeanCryptoContext``).

Owns: the one override of aioquic's ``CryptoContext`` (packet encryption and decryption).
aioquic's header protection copies a whole packet three times to change five header bytes
when sending (header + payload, a bytearray of it, bytes of that) and once when receiving
(a bytearray of the packet), and slices the received payload out of the packet (a copy).
``LeanCryptoContext`` masks or unmasks the header alone, joins it to the encrypted payload
once, and decrypts from a memoryview of the packet. Every byte on the wire is the same
(tests/unit/test_quic_crypto.py checks it against aioquic's own class).

Invariants: aioquic is pinned (``lurcher.core.quic_frames.AIOQUIC_VERSION``); only the 1-RTT
contexts of a connection are switched (``lean_packet_protection``, called once the handshake
is done), so the handshake runs on aioquic's code unchanged. A key update keeps the switched
objects (aioquic copies the new keys into them).
"""

from __future__ import annotations

from typing import Any

from aioquic import tls
from aioquic._crypto import CryptoError
from aioquic.quic.crypto import (CryptoContext, KeyUnavailableError, decode_packet_number,
                                 next_key_phase)
from aioquic.quic.packet import is_long_header

PACKET_NUMBER_LENGTH_MAX = 4
SAMPLE_LENGTH = 16
LONG_HEADER_MASK = 0x0F
SHORT_HEADER_MASK = 0x1F


def _first_byte_mask(first_byte: int, mask: bytes) -> int:
    return mask[0] & (LONG_HEADER_MASK if first_byte & 0x80 else SHORT_HEADER_MASK)


def masked_header(hp: Any, plain_header: bytes, protected_payload: bytes) -> bytes:
    """``plain_header`` with header protection applied (RFC 9001 §5.4)."""
    pn_length = (plain_header[0] & 0x03) + 1
    pn_offset = len(plain_header) - pn_length
    sample_offset = PACKET_NUMBER_LENGTH_MAX - pn_length
    mask = hp._mask(protected_payload[sample_offset:sample_offset + SAMPLE_LENGTH])
    header = bytearray(plain_header)
    header[0] ^= _first_byte_mask(header[0], mask)
    for i in range(pn_length):
        header[pn_offset + i] ^= mask[1 + i]
    return bytes(header)


def unmasked_header(hp: Any, packet: bytes, pn_offset: int) -> tuple[bytes, int]:
    """The plain header of ``packet`` and its truncated packet number. Raises CryptoError."""
    sample_offset = pn_offset + PACKET_NUMBER_LENGTH_MAX
    if sample_offset + SAMPLE_LENGTH > len(packet):
        raise CryptoError("Packet is too short to sample")
    mask = hp._mask(packet[sample_offset:sample_offset + SAMPLE_LENGTH])
    header = bytearray(packet[:sample_offset])
    header[0] ^= _first_byte_mask(header[0], mask)
    pn_length = (header[0] & 0x03) + 1
    truncated = 0
    for i in range(pn_length):
        header[pn_offset + i] ^= mask[1 + i]
        truncated = header[pn_offset + i] | (truncated << 8)
    return bytes(header[:pn_offset + pn_length]), truncated


class LeanCryptoContext(CryptoContext):
    """aioquic's ``CryptoContext`` without the whole-packet copies (module docstring)."""

    def decrypt_packet(self, packet: bytes, encrypted_offset: int,
                       expected_packet_number: int) -> tuple[bytes, bytes, int, bool]:
        if self.aead is None:
            raise KeyUnavailableError("Decryption key is not available")
        plain_header, truncated = unmasked_header(self.hp, packet, encrypted_offset)
        first_byte = plain_header[0]
        pn_length = (first_byte & 0x03) + 1
        packet_number = decode_packet_number(truncated, pn_length * 8, expected_packet_number)
        crypto: CryptoContext = self
        if not is_long_header(first_byte) and (first_byte & 4) >> 2 != self.key_phase:
            crypto = next_key_phase(self)
        payload = crypto.aead.decrypt(memoryview(packet)[len(plain_header):], plain_header,
                                      packet_number)
        return plain_header, payload, packet_number, crypto is not self

    def encrypt_packet(self, plain_header: bytes, plain_payload: bytes,
                       packet_number: int) -> bytes:
        assert self.is_valid(), "Encryption key is not available"
        protected = self.aead.encrypt(plain_payload, plain_header, packet_number)
        return masked_header(self.hp, plain_header, protected) + protected


def lean_packet_protection(quic: Any) -> None:
    """Switch the 1-RTT packet protection of aioquic connection ``quic`` to
    ``LeanCryptoContext`` (both directions; a connection without 1-RTT keys is left alone)."""
    pair = quic._cryptos.get(tls.Epoch.ONE_RTT)
    if pair is None:
        return
    for context in (pair.send, pair.recv):
        if type(context) is CryptoContext:
            context.__class__ = LeanCryptoContext
