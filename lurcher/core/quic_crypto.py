"""Packet protection of aioquic's 1-RTT packets with fewer copies (``LeanCryptoContext``).

Owns: the one override of aioquic's ``CryptoContext`` (packet encryption and decryption).
aioquic's header protection copies a whole packet three times to change five header bytes
when sending (header + payload, a bytearray of it, bytes of that) and once when receiving
(a bytearray of the packet), and slices the received payload out of the packet (a copy).
``LeanCryptoContext`` masks or unmasks the header alone, joins it to the encrypted payload
once, and decrypts from a memoryview of the packet. Every byte on the wire is the same
(tests/unit/test_quic_crypto.py checks it against aioquic's own class).

``encrypt_parts`` protects a packet whose payload is in several buffers (a STREAM frame's
header in aioquic's packet buffer, its data still in the stream's send buffer,
``lurcher.core.quic_builder``): the header and the parts are joined once into the datagram
itself (``bytearray.join``: one copy, no zeroing) and AES-GCM runs over the payload in place
(cryptography's ``encrypt_into`` with its output where its input starts; ``IN_PLACE``,
checked once at import against a one-shot ``encrypt``; where it does not hold, the payload
is copied out first). Per packet (``scripts/quic_encrypt_bench.py``): 10.4 us at 64,000
bytes, 4.7 us at 8,000, 4.0 us at 1,150, against 12.9, 6.4 and 5.4 us when the parts were
gathered into a per-thread scratch buffer and encrypted into a zeroed datagram, and 10.9 us
at 8 KB for a ``Cipher`` encryptor fed the parts without any copy (about 6 us of it setting
up the encryptor); a one-shot ``encrypt`` would need the header joined in front afterwards
(another copy of the packet). It serves the AES-GCM suites; for ChaCha20 it answers None and
the caller joins the parts.

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
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from aioquic.quic.packet import is_long_header

PACKET_NUMBER_LENGTH_MAX = 4
SAMPLE_LENGTH = 16
LONG_HEADER_MASK = 0x0F
SHORT_HEADER_MASK = 0x1F
TAG_BYTES = 16
NONCE_BYTES = 12
AES_GCM_SUITES = (tls.CipherSuite.AES_128_GCM_SHA256, tls.CipherSuite.AES_256_GCM_SHA384)


def _first_byte_mask(first_byte: int, mask: bytes) -> int:
    return mask[0] & (LONG_HEADER_MASK if first_byte & 0x80 else SHORT_HEADER_MASK)


def header_mask(hp: Any, sample: Any) -> bytes:
    """aioquic's ``HeaderProtection._mask``, with AES's one cipher update called directly."""
    return hp._mask(sample) if hp._is_chacha20 else hp._encryptor.update(sample)


def _xor_packet_number(header: Any, pn_offset: int, pn_length: int, mask: bytes) -> int:
    """The packet number bytes of ``header`` at ``pn_offset`` XOR the mask's, as an int."""
    return (int.from_bytes(header[pn_offset:pn_offset + pn_length], "big")
            ^ int.from_bytes(mask[1:1 + pn_length], "big"))


def masked_header(hp: Any, plain_header: bytes, protected_payload: bytes) -> bytes:
    """``plain_header`` with header protection applied (RFC 9001 §5.4)."""
    first = plain_header[0]
    pn_length = (first & 0x03) + 1
    pn_offset = len(plain_header) - pn_length
    sample_offset = PACKET_NUMBER_LENGTH_MAX - pn_length
    mask = header_mask(hp, protected_payload[sample_offset:sample_offset + SAMPLE_LENGTH])
    masked_number = _xor_packet_number(plain_header, pn_offset, pn_length, mask)
    return (bytes((first ^ _first_byte_mask(first, mask),)) + plain_header[1:pn_offset]
            + masked_number.to_bytes(pn_length, "big"))


def mask_header_in_place(hp: Any, packet: bytearray, header_bytes: int) -> None:
    """Apply header protection to the first ``header_bytes`` of protected ``packet``."""
    pn_length = (packet[0] & 0x03) + 1
    pn_offset = header_bytes - pn_length
    sample_at = header_bytes + PACKET_NUMBER_LENGTH_MAX - pn_length
    mask = header_mask(hp, bytes(packet[sample_at:sample_at + SAMPLE_LENGTH]))
    masked_number = _xor_packet_number(packet, pn_offset, pn_length, mask)
    packet[0] ^= _first_byte_mask(packet[0], mask)
    packet[pn_offset:header_bytes] = masked_number.to_bytes(pn_length, "big")


def unmasked_header(hp: Any, packet: bytes, pn_offset: int) -> tuple[bytes, int]:
    """The plain header of ``packet`` and its truncated packet number. Raises CryptoError."""
    sample_offset = pn_offset + PACKET_NUMBER_LENGTH_MAX
    if sample_offset + SAMPLE_LENGTH > len(packet):
        raise CryptoError("Packet is too short to sample")
    mask = header_mask(hp, packet[sample_offset:sample_offset + SAMPLE_LENGTH])
    first = packet[0] ^ _first_byte_mask(packet[0], mask)
    pn_length = (first & 0x03) + 1
    truncated = _xor_packet_number(packet, pn_offset, pn_length, mask)
    return (bytes((first,)) + packet[1:pn_offset] + truncated.to_bytes(pn_length, "big"),
            truncated)


_TAG_ROOM = bytes(TAG_BYTES)


def _encrypts_in_place() -> bool:
    """Whether this build's AES-GCM ``encrypt_into`` may write over its own plaintext (the
    output starting where the input does, as OpenSSL's EVP allows): checked once, against a
    one-shot ``encrypt`` of the same bytes."""
    aead = AESGCM(bytes(16))
    nonce, aad, plain = bytes(NONCE_BYTES), b"header", bytes(range(256)) * 4
    packet = bytearray().join([plain, _TAG_ROOM])
    view = memoryview(packet)
    try:
        aead.encrypt_into(nonce, view[:len(plain)], aad, view)
    except (ValueError, TypeError, BufferError):
        return False
    finally:
        view.release()
    return bytes(packet) == aead.encrypt(nonce, plain, aad)


IN_PLACE = _encrypts_in_place()


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
        aead = crypto.aead  # aioquic's AEAD: its cipher called with its nonce, no wrappers
        try:
            payload = aead._aead.decrypt((aead._iv ^ packet_number).to_bytes(NONCE_BYTES, "big"),
                                         memoryview(packet)[len(plain_header):], plain_header)
        except InvalidTag as exc:
            raise CryptoError(str(exc)) from None
        return plain_header, payload, packet_number, crypto is not self

    def encrypt_packet(self, plain_header: bytes, plain_payload: bytes,
                       packet_number: int) -> bytes:
        assert self.is_valid(), "Encryption key is not available"
        aead = self.aead
        protected = aead._aead.encrypt((aead._iv ^ packet_number).to_bytes(NONCE_BYTES, "big"),
                                       plain_payload, plain_header)
        return masked_header(self.hp, plain_header, protected) + protected

    def encrypt_parts(self, plain_header: bytes, parts: list[Any],
                      packet_number: int) -> bytearray | None:
        """The protected packet of ``plain_header`` and the payload ``parts`` (bytes-like,
        in order), the same bytes as ``encrypt_packet`` of the joined payload; None when the
        suite is not AES-GCM."""
        if not self.can_encrypt_parts():
            return None
        aead = self.aead
        header_bytes = len(plain_header)
        packet = bytearray().join([plain_header, *parts, _TAG_ROOM])  # one copy, no zeroing
        view = memoryview(packet)
        size = len(packet) - TAG_BYTES
        plain = view[header_bytes:size] if IN_PLACE else bytes(view[header_bytes:size])
        aead._aead.encrypt_into((aead._iv ^ packet_number).to_bytes(NONCE_BYTES, "big"), plain,
                                plain_header, view[header_bytes:])
        if IN_PLACE:
            plain.release()
        view.release()
        mask_header_in_place(self.hp, packet, header_bytes)
        return packet

    def can_encrypt_parts(self) -> bool:
        """Whether ``encrypt_parts`` serves the current keys (AES-GCM)."""
        return self.cipher_suite in AES_GCM_SUITES


def lean_packet_protection(quic: Any) -> None:
    """Switch the 1-RTT packet protection of aioquic connection ``quic`` to
    ``LeanCryptoContext`` (both directions; a connection without 1-RTT keys is left alone)."""
    pair = quic._cryptos.get(tls.Epoch.ONE_RTT)
    if pair is None:
        return
    for context in (pair.send, pair.recv):
        if type(context) is CryptoContext:
            context.__class__ = LeanCryptoContext
