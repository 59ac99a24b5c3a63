"""Data source options: parsing Spark's string options into typed values.

Owns the option names (case-insensitive, as Spark passes them) and their defaults.
``connection_config(options)`` builds the SDK's ``ClientConfig`` from either a connection
string (option ``connection``) or the separate options ``address``, ``transport``,
``username``/``password``, ``token`` (a personal access token) and ``tls*``; separate
options override what the connection string says. ``SourceOptions`` is everything a
reader or writer needs; it is a frozen msgspec Struct, so it pickles to executors.

Every parse failure raises ``LurcherSparkError`` naming the option, also for a value the
wire could not carry (an address without a port, a name or credential over 255 bytes of
UTF-8), which would otherwise fail later as a ValueError deep in the SDK.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from lurcher.core.wire.address import split_address
from lurcher.core.wire.buffer import U32_MAX, Writer
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.identifier import Identifier, wire_form
from lurcher.core.wire.units import decimal, shown
from lurcher.sdk.config import ClientConfig
from lurcher.sdk.connstring import parse as parse_connection_string


class LurcherSparkError(RuntimeError):
    """A lurcher data source failure (bad option, Iggy error during a read or write)."""


I64_MAX = (1 << 63) - 1
DEFAULT_POLL_MESSAGES = 5_000
DEFAULT_MAX_MESSAGES_PER_PARTITION = 1_000_000
DEFAULT_SEND_MESSAGES = 1_000


def _text(value: str) -> str:
    return value


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"expected true or false, got {value!r}")
    return lowered == "true"


def _positive(value: str) -> int:
    """A count: ASCII digits, 1 up to a Java long (Spark's ReadMaxRows holds one)."""
    number = decimal(value.strip(), I64_MAX)
    if not number:
        raise ValueError(f"expected a positive number up to {I64_MAX}, got {shown(value)}")
    return number


def _seconds(value: str) -> float:
    seconds = float(value)
    if not 0 < seconds < math.inf:
        raise ValueError(f"expected a positive number of seconds, got {value!r}")
    return seconds


def _address(value: str) -> str:
    """A "host:port" (``split_address``: a port within 65535)."""
    split_address(value)
    return value


def _wire_name(value: str) -> str:
    """A text the wire carries with a u8 length (credentials): UTF-8 of at most 255 bytes,
    as ``Writer.name`` encodes it (its ValueError otherwise)."""
    Writer().name(value)
    return value


def _identifier(value: str) -> str:
    """A stream, topic or consumer: a u32 id or a name the wire can carry (``wire_form``;
    its ValueError for a name over 255 bytes or text that is not UTF-8)."""
    wire_form(Identifier.parse(value).value)
    return value


# option (lower case) -> (ClientConfig field, converter)
_CONNECTION_FIELDS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "address": ("address", _address),
    "transport": ("transport", _text),
    "username": ("username", _wire_name),
    "password": ("password", _wire_name),
    "token": ("token", _wire_name),
    "pat": ("token", _wire_name),
    "tls": ("tls", _bool),
    "tls_domain": ("tls_domain", _text),
    "tls_ca_file": ("tls_ca_file", _text),
    "tls_validate_certificate": ("tls_validate_certificate", _bool),
    "connect_timeout_s": ("connect_timeout_s", _seconds),
    "request_timeout_s": ("request_timeout_s", _seconds),
}


def lowered(options: Mapping[str, str]) -> dict[str, str]:
    """Options with lower-case names (Spark's option map is case-insensitive)."""
    return {str(k).lower(): str(v) for k, v in options.items()}


def _convert(name: str, convert: Callable[[str], Any], value: str) -> Any:
    try:
        return convert(value)
    except ValueError as e:
        raise LurcherSparkError(f"lurcher option {name!r}: {e}") from None


def connection_config(options: Mapping[str, str]) -> ClientConfig:
    """The SDK ClientConfig the options describe. Heartbeats are off (short-lived clients).

    Raises LurcherSparkError for a bad connection string or option value.
    """
    opts = lowered(options)
    config = ClientConfig()
    if "connection" in opts:
        try:
            config = parse_connection_string(opts["connection"])
        except IggyError as e:
            raise LurcherSparkError(f"lurcher option 'connection': {e}") from None
        for credential in (config.username, config.password, config.token):
            if credential is not None:
                _convert("connection", _wire_name, credential)
    fields = {field: _convert(name, convert, opts[name])
              for name, (field, convert) in _CONNECTION_FIELDS.items() if name in opts}
    if "token" in fields:
        fields.update(username=None, password=None)
    fields.setdefault("heartbeat_interval_s", None)
    return msgspec.structs.replace(config, **fields)


class SourceOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Typed options of one read or write (see the package docstring for their meaning)."""

    config: ClientConfig
    stream: str
    topic: str
    partitions: tuple[int, ...] | None = None
    starting_offsets: str | None = None
    ending_offsets: str | None = None
    starting_timestamp: str | None = None
    ending_timestamp: str | None = None
    max_messages_per_partition: int = DEFAULT_MAX_MESSAGES_PER_PARTITION
    max_messages_per_trigger: int | None = None
    poll_messages: int = DEFAULT_POLL_MESSAGES
    send_messages: int = DEFAULT_SEND_MESSAGES
    filter_pushdown: bool = False
    fail_on_data_loss: bool = True
    exactly_once: bool = True
    commit_consumer: str | None = None
    commit_consumer_group: str | None = None


def _partitions(value: str) -> tuple[int, ...]:
    ids = {decimal(p, U32_MAX) for p in value.replace(" ", "").split(",") if p}
    if not ids or None in ids:
        raise ValueError(f"expected a comma-separated list of partition ids, got {shown(value)}")
    return tuple(sorted(ids))


# option (lower case) -> (SourceOptions field, converter)
_SOURCE_FIELDS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "partitions": ("partitions", _partitions),
    "startingoffsets": ("starting_offsets", _text),
    "endingoffsets": ("ending_offsets", _text),
    "startingtimestamp": ("starting_timestamp", _text),
    "endingtimestamp": ("ending_timestamp", _text),
    "maxmessagesperpartition": ("max_messages_per_partition", _positive),
    "maxmessagespertrigger": ("max_messages_per_trigger", _positive),
    "pollmessages": ("poll_messages", _positive),
    "sendmessages": ("send_messages", _positive),
    "filterpushdown": ("filter_pushdown", _bool),
    "failondataloss": ("fail_on_data_loss", _bool),
    "exactlyonce": ("exactly_once", _bool),
    "commitconsumer": ("commit_consumer", _identifier),
    "commitconsumergroup": ("commit_consumer_group", _identifier),
}


def source_options(options: Mapping[str, str]) -> SourceOptions:
    """Parse every option. Raises LurcherSparkError (missing stream/topic, bad value)."""
    opts = lowered(options)
    for required in ("stream", "topic"):
        if not opts.get(required):
            raise LurcherSparkError(f"lurcher option {required!r} is required")
        _convert(required, _identifier, opts[required])
    fields = {field: _convert(name, convert, opts[name])
              for name, (field, convert) in _SOURCE_FIELDS.items() if name in opts}
    return SourceOptions(config=connection_config(opts), stream=opts["stream"],
                         topic=opts["topic"], **fields)
