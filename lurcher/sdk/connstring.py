"""Connection strings in the Iggy 0.8 forms, plus ``lurcher://`` (an alias of ``iggy+tcp://``).

    iggy://user:pass@host:port?opt=value&...        (TCP)
    iggy+<tcp|quic|http|ws>://user:pass@host:port
    iggy+tcp://<personal_access_token>@host:port     (no ':' in the credentials part)
    lurcher://... and lurcher+<transport>://...       (same meaning)

Rules (as the 0.8 SDK): credentials are required and non-empty; the host needs ``:port``;
options are ``key=value`` pairs from the transport's table below, anything else is refused.
``iggy+wss://`` is refused (use ``iggy+ws://...?tls=true``). Unlike the 0.8 SDK, a bracketed
IPv6 host (``[::1]:8090``) is accepted. Durations are humantime strings; retries are a
number or ``unlimited`` (HTTP's ``retries`` is the others' ``reconnection_retries``: the
reconnect attempts after a lost connection, default unlimited); timeouts are more than 0
(``request_timeout=none``: no request timeout). ``idle_poll`` (lurcher's own, every
transport) is the client's ``idle_poll_s``: a duration from 0 to 10 ms. A transport's own
options (sizes, QUIC settings, WebSocket buffers) are kept as text for its connection class
and checked here by the rules that class applies (``TRANSPORT_OPTION_CHECKS``), so a value
it would refuse at connect is refused at parse; a size of 0 (``response_buffer_size``,
``max_message_size``, ``max_frame_size``, ``max_write_buffer_size``) is refused, not taken
as the default. Four
options of Iggy's are accepted, so its connection strings work unchanged, and change
nothing here: WebSocket's ``read_buffer_size``, ``write_buffer_size`` (each message is
written at once) and ``accept_unmasked_frames`` (a server's setting: frames from a server
are never masked), and QUIC's ``datagram_send_buffer_size`` (neither Iggy nor lurcher sends
QUIC datagrams). Every failure is IggyError
INVALID_CONNECTION_STRING (8000) with a one-line message naming the problem; no message
repeats the credentials (errors are printed at start-up and logged).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lurcher.core.idle_poll import MAX_IDLE_POLL_S
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.sdk.config import TRANSPORTS, ClientConfig
from lurcher.sdk.connection.base import size_setting
from lurcher.core.wire.units import parse_duration

SCHEMES = ("iggy", "lurcher")
_RECONNECT = ("reconnection_retries", "reconnection_interval", "reestablish_after",
              "heartbeat_interval")
_TLS = ("tls", "tls_domain", "tls_ca_file")
_TIMEOUTS = ("connect_timeout", "request_timeout", "idle_poll")
ALLOWED_OPTIONS: dict[str, frozenset[str]] = {
    "tcp": frozenset((*_TLS, *_RECONNECT, *_TIMEOUTS, "nodelay", "response_buffer_size")),
    "quic": frozenset(("response_buffer_size", "max_concurrent_bidi_streams",
                       "datagram_send_buffer_size", "initial_mtu", "send_window",
                       "receive_window", "keep_alive_interval", "max_idle_timeout",
                       "validate_certificate", "heartbeat_interval", "reconnection_max_retries",
                       "reconnection_interval", "reconnection_reestablish_after", *_TIMEOUTS)),
    "http": frozenset(("heartbeat_interval", "retries", "response_buffer_size", *_TIMEOUTS)),
    "ws": frozenset((*_TLS, *_RECONNECT, *_TIMEOUTS, "response_buffer_size",
                     "read_buffer_size", "write_buffer_size",
                     "max_write_buffer_size", "max_message_size", "max_frame_size",
                     "accept_unmasked_frames", "tls_validate_certificate")),
}


def _fail(detail: str) -> IggyError:
    return IggyError(ErrorCode.INVALID_CONNECTION_STRING, detail)


def _bool(value: str) -> bool:
    lowered = value.lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"expected true or false, got {value!r}")
    return lowered == "true"


def _retries(value: str) -> int | None:
    if value.lower() == "unlimited":
        return None
    if not value.isdigit():
        raise ValueError(f"expected a number or 'unlimited', got {value!r}")
    return int(value)


def _seconds(value: str) -> float:
    return parse_duration(value)


def _timeout(value: str) -> float:
    seconds = parse_duration(value)
    if seconds <= 0:
        raise ValueError(f"expected a duration over 0, got {value!r}")
    return seconds


def _optional_timeout(value: str) -> float | None:
    return None if value.strip().lower() == "none" else _timeout(value)


def _idle_poll(value: str) -> float:
    seconds = parse_duration(value)
    if not 0 <= seconds <= MAX_IDLE_POLL_S:
        raise ValueError(f"expected a duration from 0 to {MAX_IDLE_POLL_S * 1000:g} ms, "
                         f"got {value!r}")
    return seconds


def _count(value: str) -> int:
    """A non-negative integer (Iggy parses these options as usize / u64)."""
    if not value.isascii() or not value.isdigit():
        raise ValueError(f"expected a whole number of 0 or more, got {value!r}")
    return int(value)


def _size_over_0(key: str) -> Callable[[str], Any]:
    """The check of a size option a connection class reads with ``size_setting``."""
    return lambda value: size_setting({key: value}, key)


def _quic_setting(key: str) -> Callable[[str], Any]:
    """The check of a QUIC setting: the QUIC connection's own (``client_settings``)."""
    def check(value: str) -> Any:
        from lurcher.sdk.connection.quic import client_settings  # loads aioquic: QUIC only
        return client_settings(ClientConfig(transport="quic", options={key: value}))
    return check


# transport option kept as text -> its check (raises ValueError, or IggyError naming it).
TRANSPORT_OPTION_CHECKS: dict[str, Callable[[str], Any]] = {
    "response_buffer_size": _size_over_0("response_buffer_size"),
    "max_message_size": _size_over_0("max_message_size"),
    "max_frame_size": _size_over_0("max_frame_size"),
    "max_write_buffer_size": _size_over_0("max_write_buffer_size"),
    "read_buffer_size": _count, "write_buffer_size": _count,
    "accept_unmasked_frames": _bool, "datagram_send_buffer_size": _count,
    **{key: _quic_setting(key) for key in (
        "initial_mtu", "send_window", "receive_window", "keep_alive_interval",
        "max_idle_timeout", "max_concurrent_bidi_streams")},
}


# option -> (ClientConfig field, converter); options not listed go to ``options`` as text.
_FIELDS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "tls": ("tls", _bool),
    "tls_domain": ("tls_domain", str),
    "tls_ca_file": ("tls_ca_file", str),
    "tls_validate_certificate": ("tls_validate_certificate", _bool),
    "validate_certificate": ("tls_validate_certificate", _bool),
    "nodelay": ("nodelay", _bool),
    "heartbeat_interval": ("heartbeat_interval_s", _seconds),
    "reconnection_retries": ("reconnection_retries", _retries),
    "reconnection_max_retries": ("reconnection_retries", _retries),
    "retries": ("reconnection_retries", _retries),  # HTTP's name for it (Iggy 0.8)
    "reconnection_interval": ("reconnection_interval_s", _seconds),
    "reestablish_after": ("reestablish_after_s", _seconds),
    "reconnection_reestablish_after": ("reestablish_after_s", _seconds),
    "connect_timeout": ("connect_timeout_s", _timeout),
    "request_timeout": ("request_timeout_s", _optional_timeout),
    "idle_poll": ("idle_poll_s", _idle_poll),
}


def split_scheme(text: str) -> tuple[str, str]:
    """``(transport, rest after '://')``. Raises IggyError INVALID_CONNECTION_STRING."""
    scheme, sep, rest = text.partition("://")
    if not sep:
        raise _fail("missing '://': expected iggy://user:password@host:port or "
                    "iggy+<transport>://...")
    base, plus, transport = scheme.lower().partition("+")
    if base not in SCHEMES:
        raise _fail(f"unknown scheme {_shown_scheme(scheme)}: expected iggy:// or "
                    f"iggy+<transport>://")
    if plus and transport not in TRANSPORTS:
        raise _fail(f"unknown transport {transport!r}: expected one of {', '.join(TRANSPORTS)}")
    return (transport if plus else "tcp"), rest


def _shown_scheme(scheme: str) -> str:
    """``scheme`` quoted when it has only the characters of a scheme (RFC 3986: letters,
    digits, ``+-.``), else a description: text before '://' that is not a scheme may be
    credentials (``iggy:/user:pass://...``), and errors are printed and logged."""
    if scheme and all(c.isascii() and (c.isalnum() or c in "+-.") for c in scheme):
        return repr(scheme)
    return "(the text before '://' is not a scheme)"


def split_credentials(rest: str) -> tuple[dict[str, str], str]:
    """``({username,password} or {token}, host part)``. Raises IggyError."""
    credentials, at, host = rest.rpartition("@")
    if not at or not credentials:
        raise _fail("missing credentials: expected user:password@host:port or token@host:port")
    if ":" not in credentials:
        return {"token": credentials}, host
    username, _, password = credentials.partition(":")
    if not username or not password:
        raise _fail("username and password must not be empty")
    return {"username": username, "password": password}, host


def check_address(address: str) -> None:
    """Raises IggyError unless ``address`` is host:port with a port in 1..65535."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or host in ("[]",):
        raise _fail(f"address {address!r} must be host:port")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise _fail(f"invalid port {port!r} in {address!r}")
    if host.startswith("[") != host.endswith("]") or (":" in host and not host.startswith("[")):
        raise _fail(f"invalid host {host!r}: write IPv6 addresses as [addr]:port")


def parse_options(query: str, transport: str) -> dict[str, Any]:
    """ClientConfig keyword arguments for the ``?a=b&c=d`` part. Raises IggyError."""
    fields: dict[str, Any] = {}
    extra: dict[str, str] = {}
    for item in filter(None, query.split("&")):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise _fail(f"option {item!r} must be key=value")
        parse_option(key, value, transport, fields, extra)
    if extra:
        fields["options"] = extra
    return fields


def parse_option(key: str, value: str, transport: str, fields: dict[str, Any],
                 extra: dict[str, str]) -> None:
    """One option: into ``fields`` (ClientConfig keyword arguments) or ``extra`` (the
    transport's own options, as text). Raises IggyError."""
    if key not in ALLOWED_OPTIONS[transport]:
        raise _fail(f"unknown option {key!r} for {transport}")
    if key not in _FIELDS:
        _check(key, TRANSPORT_OPTION_CHECKS[key], value)
        extra[key] = value
        return
    name, convert = _FIELDS[key]
    fields[name] = _check(key, convert, value)


def _check(key: str, convert: Callable[[str], Any], value: str) -> Any:
    """``convert(value)``. Raises IggyError INVALID_CONNECTION_STRING naming ``key``."""
    try:
        return convert(value)
    except ValueError as e:
        raise _fail(f"option {key}: {e}") from None
    except IggyError as e:  # a connection class's own check, its detail naming the option
        raise _fail(f"option {e.detail.removeprefix('quic option ')}") from None


def parse(text: str) -> ClientConfig:
    """The ``ClientConfig`` of a connection string. Raises IggyError INVALID_CONNECTION_STRING."""
    transport, rest = split_scheme(text.strip())
    rest, _, query = rest.partition("?")
    credentials, address = split_credentials(rest)
    check_address(address)
    return ClientConfig(transport=transport, address=address, **credentials,
                        **parse_options(query, transport))


def format_connection_string(config: ClientConfig) -> str:
    """A connection string for ``config``'s transport, address and credentials (no options)."""
    scheme = "iggy" if config.transport == "tcp" else f"iggy+{config.transport}"
    creds = config.token if config.token else f"{config.username}:{config.password}"
    return f"{scheme}://{creds}@{config.address}"
