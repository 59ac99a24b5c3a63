"""Lean 1-RTT packet protection (issue 18): ``LeanCryptoContext`` puts the same bytes on the
wire as aioquic's ``CryptoContext`` and reads aioquic's packets back, both cipher suites."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from aioquic import tls
from aioquic.quic.crypto import CryptoContext, CryptoError, apply_key_phase, next_key_phase

from lurcher.core.quic import QuicSettings
from lurcher.core import quic_crypto
from lurcher.core.quic_crypto import LeanCryptoContext
from tests.support.quic_pair import connected_pair

SUITES = [tls.CipherSuite.AES_128_GCM_SHA256, tls.CipherSuite.CHACHA20_POLY1305_SHA256]
SHORT_HEADER = bytes([0x41]) + bytes(range(8)) + bytes([0x12, 0x34])  # 2-byte packet number


def _contexts(suite: tls.CipherSuite) -> tuple[CryptoContext, LeanCryptoContext]:
    secret = bytes(range(32))
    theirs, ours = CryptoContext(), LeanCryptoContext()
    for context in (theirs, ours):
        context.setup(cipher_suite=suite, secret=secret, version=1)
    return theirs, ours


@pytest.mark.parametrize("suite", SUITES)
def test_the_same_packet_bytes_as_aioquic_and_each_reads_the_other(suite: tls.CipherSuite) -> None:
    theirs, ours = _contexts(suite)
    payload = os.urandom(64_000)
    packet = ours.encrypt_packet(SHORT_HEADER, payload, 0x1234)
    assert packet == theirs.encrypt_packet(SHORT_HEADER, payload, 0x1234)
    header_end = len(SHORT_HEADER) - 2
    assert ours.decrypt_packet(packet, header_end, 0x1230) == theirs.decrypt_packet(
        packet, header_end, 0x1230)
    assert ours.decrypt_packet(packet, header_end, 0x1230)[1:3] == (payload, 0x1234)


def test_a_damaged_packet_is_refused() -> None:
    _, ours = _contexts(SUITES[0])
    packet = bytearray(ours.encrypt_packet(SHORT_HEADER, b"x" * 100, 7))
    packet[-1] ^= 1
    with pytest.raises(CryptoError):
        ours.decrypt_packet(bytes(packet), len(SHORT_HEADER) - 2, 7)
    with pytest.raises(CryptoError):
        ours.decrypt_packet(bytes(packet[:20]), len(SHORT_HEADER) - 2, 7)


def test_connections_switch_their_one_rtt_protection_once_handshaken(tmp_path: Path) -> None:
    cq, sq, ct, st = connected_pair(tmp_path, QuicSettings(), QuicSettings())
    for quic in (cq, sq):
        pair = quic._cryptos[tls.Epoch.ONE_RTT]
        assert type(pair.send) is LeanCryptoContext and type(pair.recv) is LeanCryptoContext
        assert type(quic._cryptos[tls.Epoch.HANDSHAKE].send) is CryptoContext


@pytest.mark.parametrize("in_place", [True, False])
@pytest.mark.parametrize("suite", SUITES + [tls.CipherSuite.AES_256_GCM_SHA384])
def test_a_payload_in_parts_gives_the_bytes_of_the_joined_payload(
        suite: tls.CipherSuite, in_place: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Encrypted in place where this build allows it (``IN_PLACE``), else from a copy of the
    payload: the same bytes as aioquic's protection of the joined payload either way."""
    monkeypatch.setattr(quic_crypto, "IN_PLACE", in_place and quic_crypto.IN_PLACE)
    secret = bytes(range(48 if suite == tls.CipherSuite.AES_256_GCM_SHA384 else 32))
    theirs, ours = CryptoContext(), LeanCryptoContext()
    for context in (theirs, ours):
        context.setup(cipher_suite=suite, secret=secret, version=1)
    parts = [os.urandom(9), memoryview(os.urandom(70_000))[5:64_005], b"", os.urandom(3)]
    packet = ours.encrypt_parts(SHORT_HEADER, parts, 0x1234)
    if suite == tls.CipherSuite.CHACHA20_POLY1305_SHA256:
        assert packet is None and not ours.can_encrypt_parts()
        return
    joined = b"".join(bytes(part) for part in parts)
    assert bytes(packet) == theirs.encrypt_packet(SHORT_HEADER, joined, 0x1234)
    assert ours.can_encrypt_parts()


def test_a_payload_in_parts_after_a_key_update_uses_the_new_keys() -> None:
    """After a key update (aioquic's ``apply_key_phase`` replaces the context's AEAD) the
    parts are protected with the new keys, as aioquic protects the joined payload."""
    theirs, ours = _contexts(tls.CipherSuite.AES_128_GCM_SHA256)
    parts = [os.urandom(7), memoryview(os.urandom(9_000))[3:8_003]]
    before = bytes(ours.encrypt_parts(SHORT_HEADER, parts, 7))
    for context in (theirs, ours):
        apply_key_phase(context, next_key_phase(context), trigger="local_update")
    joined = b"".join(bytes(part) for part in parts)
    after = bytes(ours.encrypt_parts(SHORT_HEADER, parts, 7))
    assert after == theirs.encrypt_packet(SHORT_HEADER, joined, 7) and after != before


def test_this_build_encrypts_in_place() -> None:
    """The installed cryptography (>=47) lets AES-GCM write over its own plaintext (checked once at
    import against a one-shot encrypt); were it refused, packets would take the copy."""
    assert quic_crypto.IN_PLACE
