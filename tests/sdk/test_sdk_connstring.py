"""Connection-string parsing (no server): the Iggy forms, options, durations and errors."""

from __future__ import annotations

import pytest

from lurcher.sdk import ErrorCode, IggyError, parse_connection_string
from lurcher.sdk.connection.base import response_limit, size_setting
from lurcher.sdk.connstring import format_connection_string
from lurcher.core.wire.units import parse_duration


def test_user_password_form_defaults() -> None:
    cfg = parse_connection_string("iggy://iggy:secret@127.0.0.1:8090")
    assert (cfg.transport, cfg.address, cfg.username, cfg.password, cfg.token) == (
        "tcp", "127.0.0.1:8090", "iggy", "secret", None)
    assert cfg.heartbeat_interval_s == 5.0 and cfg.reconnection_retries is None
    assert cfg.reconnection_interval_s == 1.0 and not cfg.tls


@pytest.mark.parametrize("scheme,transport", [
    ("iggy+tcp", "tcp"), ("iggy+quic", "quic"), ("iggy+http", "http"), ("iggy+ws", "ws"),
    ("lurcher", "tcp"), ("lurcher+ws", "ws"), ("IGGY", "tcp"),
])
def test_transports(scheme: str, transport: str) -> None:
    assert parse_connection_string(f"{scheme}://u:p@h:1").transport == transport


def test_personal_access_token_form() -> None:
    cfg = parse_connection_string("iggy+tcp://iggypat-token123@localhost:8090")
    assert cfg.token == "iggypat-token123" and cfg.username is None


def test_password_may_contain_at_and_colon() -> None:
    cfg = parse_connection_string("iggy://user:p@ss:w@host:9")
    assert (cfg.username, cfg.password, cfg.address) == ("user", "p@ss:w", "host:9")


def test_tcp_options() -> None:
    cfg = parse_connection_string(
        "iggy://u:p@example.com:8090?tls=true&tls_domain=example.com&tls_ca_file=/ca.pem"
        "&reconnection_retries=5&reconnection_interval=500ms&reestablish_after=1m"
        "&heartbeat_interval=1m 30s&nodelay=false&request_timeout=2s&idle_poll=200us")
    assert cfg.tls and cfg.tls_domain == "example.com" and cfg.tls_ca_file == "/ca.pem"
    assert cfg.reconnection_retries == 5 and cfg.reconnection_interval_s == 0.5
    assert cfg.reestablish_after_s == 60 and cfg.heartbeat_interval_s == 90
    assert not cfg.nodelay and cfg.request_timeout_s == 2
    assert cfg.idle_poll_s == pytest.approx(0.0002)
    assert parse_connection_string(
        "iggy://u:p@h:1?reconnection_retries=unlimited").reconnection_retries is None


def test_transport_specific_options_are_kept() -> None:
    cfg = parse_connection_string("iggy+ws://u:p@h:8092?max_message_size=1000&tls=true")
    assert cfg.options == {"max_message_size": "1000"} and cfg.tls
    cfg = parse_connection_string("iggy+http://u:p@h:3000?response_buffer_size=1000")
    assert cfg.options == {"response_buffer_size": "1000"}


@pytest.mark.parametrize("value,retries", [("3", 3), ("0", 0), ("unlimited", None)])
def test_http_retries_are_the_reconnection_retries(value: str, retries: int | None) -> None:
    """HTTP's ``retries`` was kept as text and never read (unlimited reconnects)."""
    cfg = parse_connection_string(f"iggy+http://u:p@h:3000?retries={value}")
    assert cfg.reconnection_retries == retries and cfg.options == {}


def test_ipv6_in_brackets() -> None:
    cfg = parse_connection_string("iggy://u:p@[::1]:8090")
    assert cfg.host_port() == ("::1", 8090)


@pytest.mark.parametrize("text,problem", [
    ("127.0.0.1:8090", "://"),
    ("http://u:p@h:1", "scheme"),
    ("iggy+wss://u:p@h:1", "transport"),
    ("iggy://h:1", "credentials"),
    ("iggy://:p@h:1", "empty"),
    ("iggy://u:@h:1", "empty"),
    ("iggy://u:p@h", "host:port"),
    ("iggy://u:p@h:99999", "port"),
    ("iggy://u:p@h:x", "port"),
    ("iggy://u:p@::1:8090", "IPv6"),
    ("iggy://u:p@h:1?bogus=1", "bogus"),
    ("iggy://u:p@h:1?tls", "key=value"),
    ("iggy://u:p@h:1?tls=yes", "tls"),
    ("iggy://u:p@h:1?heartbeat_interval=5 parsecs", "heartbeat_interval"),
    ("iggy://u:p@h:1?reconnection_retries=-1", "reconnection_retries"),
    ("iggy+http://u:p@h:1?tls=true", "tls"),
    ("iggy://u:p@h:1?idle_poll=11ms", "idle_poll"),
    ("iggy+quic://u:p@h:1?idle_poll=soon", "idle_poll"),
])
def test_invalid_strings_name_the_problem(text: str, problem: str) -> None:
    with pytest.raises(IggyError) as err:
        parse_connection_string(text)
    assert err.value.code == ErrorCode.INVALID_CONNECTION_STRING == 8000
    assert problem in str(err.value)


@pytest.mark.parametrize("query", [
    "response_buffer_size=0", "response_buffer_size=lots", "response_buffer_size=-5",
])
@pytest.mark.parametrize("transport", ["tcp", "quic", "http", "ws"])
def test_a_response_buffer_size_of_0_or_not_a_size_is_refused_at_parse(
        transport: str, query: str) -> None:
    """``response_buffer_size=0`` was taken as the default (128 MiB) and any other text was
    accepted here, to fail only at connect with InvalidConfiguration."""
    with pytest.raises(IggyError) as err:
        parse_connection_string(f"iggy+{transport}://u:p@h:1?{query}")
    assert err.value.code == ErrorCode.INVALID_CONNECTION_STRING
    assert "option response_buffer_size: " in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("key", ["response_buffer_size", "max_message_size"])
def test_a_size_of_0_given_by_hand_is_refused_at_connect(key: str) -> None:
    """A ClientConfig built by hand meets the connection's own check: 0 was the default."""
    with pytest.raises(IggyError) as err:
        size_setting({key: "0"}, key)
    assert err.value.code == ErrorCode.INVALID_CONFIGURATION and key in str(err.value)
    assert response_limit({"response_buffer_size": "1 KiB"}) == 1024


@pytest.mark.parametrize("transport,query", [
    ("ws", "max_message_size=0"), ("ws", "max_message_size=xyz"),
    ("ws", "read_buffer_size=-1"), ("ws", "write_buffer_size=1e3"),
    ("ws", "max_write_buffer_size=x"), ("ws", "max_frame_size=-2"),
    ("ws", "accept_unmasked_frames=maybe"),
    ("quic", "initial_mtu=10"), ("quic", "initial_mtu=abc"), ("quic", "send_window=abc"),
    ("quic", "receive_window=0"), ("quic", "keep_alive_interval=soon"),
    ("quic", "max_idle_timeout=soon"), ("quic", "max_concurrent_bidi_streams=0"),
    ("quic", "datagram_send_buffer_size=zz"),
])
def test_a_transport_option_its_connection_refuses_is_refused_at_parse(
        transport: str, query: str) -> None:
    """Each was accepted here, and then refused at connect (InvalidConfiguration) or, for
    the options lurcher's connections do not read, kept whatever it said."""
    with pytest.raises(IggyError) as err:
        parse_connection_string(f"iggy+{transport}://u:p@h:1?{query}")
    assert err.value.code == ErrorCode.INVALID_CONNECTION_STRING
    option = query.partition("=")[0]
    assert f"option {option}: " in str(err.value) and "\n" not in str(err.value)


def test_every_iggy_transport_option_is_still_taken() -> None:
    """The options of Iggy 0.8's connection strings, with valid values, still parse."""
    ws = ("iggy+ws://u:p@h:1?read_buffer_size=65536&write_buffer_size=65536"
          "&max_write_buffer_size=131072&max_message_size=1048576&max_frame_size=65536"
          "&accept_unmasked_frames=false&tls_validate_certificate=false")
    assert parse_connection_string(ws).options["max_frame_size"] == "65536"
    quic = ("iggy+quic://u:p@h:1?response_buffer_size=10000000&max_concurrent_bidi_streams=10"
            "&datagram_send_buffer_size=100000&initial_mtu=1200&send_window=100000"
            "&receive_window=100000&keep_alive_interval=5000&max_idle_timeout=10000"
            "&validate_certificate=false")
    assert parse_connection_string(quic).options["initial_mtu"] == "1200"


@pytest.mark.parametrize("text", ["iggy:/u:pw-SECRET@h:1", "iggy//u:pw-SECRET@h:1",
                                  "u:pw-SECRET@h:1", "iggy:/u:pw-SE://CRET@h:1",
                                  "iggy+tcp:/pw-SECRET-token@h:1"])
def test_invalid_strings_never_repeat_the_credentials(text: str) -> None:
    """A string without '://' was repeated whole in its error (and the text before a
    '://' inside the password as its scheme), which lurcher-mcp printed at start-up."""
    with pytest.raises(IggyError) as err:
        parse_connection_string(text)
    assert "pw-SE" not in str(err.value) and "://" in str(err.value)


@pytest.mark.parametrize("text,seconds", [
    ("5s", 5), ("1m", 60), ("500ms", 0.5), ("1h 30m", 5400), ("1m30s", 90), ("2min", 120),
    ("1.5s", 1.5), ("10", 10), ("250us", 0.00025), ("1d", 86400), ("3 seconds", 3),
])
def test_humantime(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "5 parsecs", "1m x", "-1s"])
def test_humantime_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_format_round_trip() -> None:
    for text in ("iggy://u:p@h:1", "iggy+ws://tok@h:2"):
        assert format_connection_string(parse_connection_string(text)) == text


def test_requests_time_out_by_default() -> None:
    """Without a request timeout a server that accepts and never answers (or a peer gone
    without a reset) held every call, and the heartbeat's ping, for ever."""
    assert parse_connection_string("iggy://u:p@h:1").request_timeout_s == 60.0
    assert parse_connection_string("iggy://u:p@h:1?request_timeout=none").request_timeout_s is None
    for option in ("request_timeout=0", "connect_timeout=0s"):
        with pytest.raises(IggyError) as err:
            parse_connection_string(f"iggy://u:p@h:1?{option}")
        assert err.value.code == ErrorCode.INVALID_CONNECTION_STRING
        assert f"option {option.split('=')[0]}: expected a duration over 0" in str(err.value)
