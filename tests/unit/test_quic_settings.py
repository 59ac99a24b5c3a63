"""QUIC settings (issue 18): the Iggy-named keys and options, their one mapping to aioquic, and
the run-time tuning, exercised on a real pair of aioquic connections joined in memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lurcher.runtime.config import ConfigError, load_config
from lurcher.core.quic import MAX_DATAGRAM_BYTES, PROVEN_PATH_PTOS, QuicSettings
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.sdk import connstring
from lurcher.sdk.config import ClientConfig
from lurcher.sdk.connection.quic import client_configuration, client_settings
from lurcher.transports.quic import server_configuration
from tests.support.quic_pair import connected_pair, exchange

MIB = 1024 * 1024


def test_the_packaged_server_keys_map_to_settings(tmp_path: Path) -> None:
    section = load_config(environ={}).typed.quic
    settings, config = server_configuration(section, tmp_path)
    assert settings == QuicSettings(initial_mtu=64_000, send_window=16 * MIB,
                                    receive_window=16 * MIB, keep_alive_s=5.0,
                                    max_concurrent_bidi_streams=256, idle_timeout_s=10.0)
    assert config.max_data == 16 * MIB and config.idle_timeout == 10.0
    assert config.max_datagram_size == 1200  # the handshake is always small


def test_server_keys_in_iggy_form(tmp_path: Path) -> None:
    keys = {"initial_mtu": "8 KB", "send_window": "100 KB", "receive_window": "100 KB",
            "keep_alive_interval": "none", "max_concurrent_bidi_streams": "7",
            "max_idle_timeout": "3 s"}
    section = load_config(environ={f"LURCHER_QUIC_{k.upper()}": v
                                   for k, v in keys.items()}).typed.quic
    settings, config = server_configuration(section, tmp_path)
    assert settings == QuicSettings(8_000, 100_000, 100_000, 0.0, 7, 3.0)
    assert config.max_data == 100_000


@pytest.mark.parametrize("key, value", [("initial_mtu", "1000 B"), ("initial_mtu", "65508 B"),
                                        ("max_concurrent_bidi_streams", 0),
                                        ("send_window", "lots")])
def test_bad_server_keys_are_one_line_config_errors(tmp_path: Path, key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=rf"quic\.{key}") as err:
        load_config(environ={f"LURCHER_QUIC_{key.upper()}": str(value)})
    assert "\n" not in str(err.value)


def test_connection_string_options_use_iggy_names_and_milliseconds() -> None:
    config = connstring.parse("iggy+quic://u:p@127.0.0.1:8080?initial_mtu=3000&send_window=50000"
                              "&receive_window=60000&keep_alive_interval=250"
                              "&max_concurrent_bidi_streams=9&max_idle_timeout=4000")
    settings = client_settings(config)
    assert settings == QuicSettings(3_000, 50_000, 60_000, 0.25, 9, 4.0)
    quic = client_configuration(config, settings)
    assert quic.max_data == 60_000 and quic.idle_timeout == 4.0 and quic.is_client


def test_a_bad_quic_option_is_refused_naming_it() -> None:
    """In a connection string at parse (INVALID_CONNECTION_STRING), in a config built by
    hand at connect (INVALID_CONFIGURATION)."""
    too_big = str(MAX_DATAGRAM_BYTES + 1)
    with pytest.raises(IggyError) as caught:
        connstring.parse(f"iggy+quic://u:p@127.0.0.1:8080?initial_mtu={too_big}")
    assert caught.value.code == ErrorCode.INVALID_CONNECTION_STRING
    assert "initial_mtu" in str(caught.value)
    config = ClientConfig(transport="quic", options={"initial_mtu": too_big})
    with pytest.raises(IggyError) as caught:
        client_settings(config)
    assert caught.value.code == ErrorCode.INVALID_CONFIGURATION
    assert "initial_mtu" in str(caught.value)


def test_send_window_caps_the_bytes_in_flight(tmp_path: Path) -> None:
    cq, sq, ct, _ = connected_pair(tmp_path, QuicSettings(send_window=20_000), QuicSettings())
    cq._loss._cc.congestion_window = 4 * MIB
    cq.send_stream_data(cq.get_next_available_stream_id(), b"x" * MIB, end_stream=True)
    ct.before_transmit()
    sent = sum(len(data) for data, _ in cq.datagrams_to_send(1.0))  # no acknowledgement yet
    assert 20_000 - 16_000 < sent <= 20_000


def test_initial_mtu_applies_after_the_handshake_and_a_probe_timeout_falls_back(
        tmp_path: Path) -> None:
    cq, sq, ct, _ = connected_pair(tmp_path, QuicSettings(initial_mtu=9_000), QuicSettings())
    cq.send_stream_data(cq.get_next_available_stream_id(), b"x" * 100_000, end_stream=True)
    sizes = [len(data) for data, _ in cq.datagrams_to_send(1.0)]
    assert max(sizes) == 9_000
    cq._loss._pto_count = 1  # what aioquic sets when nothing sent was acknowledged in time
    ct.before_transmit()
    assert cq._max_datagram_size == 1_200 and not ct.large
    ct.loop.now += 1.0
    ct.before_transmit()
    assert cq._max_datagram_size == 1_200  # too early to retry
    cq._loss._pto_count = 0
    ct.loop.now += 1.5
    ct.before_transmit()
    assert cq._max_datagram_size == 9_000  # retried after MTU_RETRY_S


def test_datagrams_never_exceed_the_peers_max_udp_payload_size(tmp_path: Path,
                                                              monkeypatch: Any) -> None:
    """A peer that announces ``max_udp_payload_size`` 1,472 (a quinn endpoint's default)
    gets datagrams of at most that size, whatever ``initial_mtu`` says; with nothing
    announced ``initial_mtu`` applies."""
    import aioquic.quic.connection as aioquic_connection
    plain = aioquic_connection.QuicTransportParameters

    def announcing(**fields: Any) -> Any:
        return plain(**fields, max_udp_payload_size=1_472)

    monkeypatch.setattr(aioquic_connection, "QuicTransportParameters", announcing)
    big = QuicSettings(initial_mtu=64_000)
    cq, sq, ct, st = connected_pair(tmp_path, big, big)
    assert cq._max_datagram_size == sq._max_datagram_size == 1_472
    sq.send_stream_data(sq.get_next_available_stream_id(), b"x" * 100_000, end_stream=True)
    assert max(len(data) for data, _ in sq.datagrams_to_send(1.0)) == 1_472
    sq._max_datagram_size = 1_200  # a probe timeout fell back; the retry keeps the bound
    st.raise_size()
    assert sq._max_datagram_size == 1_472
    monkeypatch.setattr(aioquic_connection, "QuicTransportParameters", plain)
    cq, sq, _, _ = connected_pair(tmp_path, big, big)
    assert cq._max_datagram_size == sq._max_datagram_size == 64_000


def test_once_the_peer_acknowledged_large_datagrams_one_probe_timeout_does_not_fall_back(
        tmp_path: Path) -> None:
    cq, sq, ct, _ = connected_pair(tmp_path, QuicSettings(initial_mtu=9_000), QuicSettings())
    cq.send_stream_data(cq.get_next_available_stream_id(), b"x" * 100_000, end_stream=True)
    assert not ct.proven()
    for now in (1.0, 1.05, 1.1):  # the server's ACK goes out once its delay has passed
        exchange(cq, sq, now)
    assert ct.proven()
    cq._loss._pto_count = PROVEN_PATH_PTOS - 1  # a busy peer, late with its ACKs
    ct.before_transmit()
    assert cq._max_datagram_size == 9_000 and ct.large
    cq._loss._pto_count = PROVEN_PATH_PTOS  # nothing acknowledged for several round trips
    ct.before_transmit()
    assert cq._max_datagram_size == 1_200 and not ct.large


def test_the_peer_may_open_max_concurrent_bidi_streams(tmp_path: Path) -> None:
    cq, sq, _, _ = connected_pair(tmp_path, QuicSettings(), QuicSettings(max_concurrent_bidi_streams=4))
    assert cq._remote_max_streams_bidi == 4


def test_the_server_refuses_a_bad_quic_key_at_start_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"^quic\.initial_mtu: expected `int` <= 65507$"):
        load_config(environ={"LURCHER_QUIC_INITIAL_MTU": "65508"})
