"""The user-headers block of a message: a sequence of key/value pairs, each pair two TLVs
``kind u8, length u32, bytes`` (key first, then value).

``HeaderValue(kind, value)`` is one typed field (keys are typed fields too); ``key_text``
and ``field_text`` name them as text for maps keyed by text and JSON.
``encode_headers`` writes a mapping; ``decode_headers`` parses and validates a block into
a dict (a repeated key keeps the last value). ``validate_headers`` checks a block with the
0.8 rules and their status codes:

* block larger than 100 000 bytes -> TOO_BIG_USER_HEADERS (4017)
* truncated TLV -> INVALID_COMMAND (3); kind 0, field length outside 1..255, or an odd
  number of TLVs -> INVALID_FORMAT (4)
* kind above 15 -> INVALID_HEADER_KIND (4040)
* fixed-size kind with the wrong length -> INVALID_HEADER_KEY (4018) for a key,
  INVALID_HEADER_VALUE (4019) for a value
"""

from __future__ import annotations

import base64
import enum
import struct
from collections.abc import Mapping
from typing import Any

import msgspec

from lurcher.core.wire.buffer import Buffer, Reader, Writer
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError, WireError

MAX_USER_HEADERS_BYTES = 100_000
MAX_HEADER_FIELD_BYTES = 255


class HeaderKind(enum.IntEnum):
    RAW = 1
    STRING = 2
    BOOL = 3
    INT8 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    INT128 = 8
    UINT8 = 9
    UINT16 = 10
    UINT32 = 11
    UINT64 = 12
    UINT128 = 13
    FLOAT32 = 14
    FLOAT64 = 15


# kind -> struct format of its fixed-size value (RAW/STRING are variable; 128-bit via int)
_FORMATS = {
    HeaderKind.BOOL: "<?", HeaderKind.INT8: "<b", HeaderKind.INT16: "<h",
    HeaderKind.INT32: "<i", HeaderKind.INT64: "<q", HeaderKind.UINT8: "<B",
    HeaderKind.UINT16: "<H", HeaderKind.UINT32: "<I", HeaderKind.UINT64: "<Q",
    HeaderKind.FLOAT32: "<f", HeaderKind.FLOAT64: "<d",
}
FIXED_SIZES = {kind: struct.calcsize(fmt) for kind, fmt in _FORMATS.items()}
FIXED_SIZES |= {HeaderKind.INT128: 16, HeaderKind.UINT128: 16}


class HeaderValue(msgspec.Struct, frozen=True):
    """A typed header field: ``kind`` (HeaderKind code) and its little-endian ``value`` bytes."""

    kind: int
    value: bytes

    @classmethod
    def of(cls, kind: HeaderKind, python_value: Any) -> "HeaderValue":
        """Encode a Python value for ``kind`` (str for STRING, bytes for RAW, numbers...).

        Raises IggyError INVALID_HEADER_VALUE if the value is not of a type the kind takes
        (nothing is converted: ``_check_type``) or does not fit it (a raw or string value of
        0 or more than 255 bytes included).
        """
        try:
            return cls(int(kind), _pack(HeaderKind(kind), python_value))
        except (struct.error, OverflowError, TypeError, ValueError) as e:
            raise IggyError(ErrorCode.INVALID_HEADER_VALUE, str(e)) from None

    @classmethod
    def string(cls, text: str) -> "HeaderValue":
        return cls(HeaderKind.STRING, text.encode())

    def to_python(self) -> Any:
        """The value as a Python object: bytes for RAW, str for STRING (its bytes when they
        are not UTF-8: the server stores what a client sent), numbers otherwise."""
        kind = HeaderKind(self.kind)
        if kind == HeaderKind.RAW:
            return self.value
        if kind == HeaderKind.STRING:
            try:
                return self.value.decode()
            except UnicodeDecodeError:
                return self.value
        if kind in (HeaderKind.INT128, HeaderKind.UINT128):
            return int.from_bytes(self.value, "little", signed=kind == HeaderKind.INT128)
        return struct.unpack(_FORMATS[kind], self.value)[0]


def kind_name(kind: int) -> str:
    """``"string"``, ``"uint32"``...; ``"kind_<n>"`` for a code outside HeaderKind."""
    try:
        return HeaderKind(kind).name.lower()
    except ValueError:
        return f"kind_{kind}"


def field_text(field: HeaderValue) -> str:
    """A field's value as text: a number, ``true``/``false``, a string as itself, bytes
    (RAW, or a STRING that is not UTF-8) as base64."""
    value = field.to_python()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def key_text(key: HeaderValue) -> str:
    """A header key as one text for maps keyed by text (Spark's ``headers`` column, the MCP
    tools): a UTF-8 string key as itself, any other ``"<kind>:<field_text>"``, so keys of
    different kinds never meet. A string key that itself begins ``"<a kind's name>:"``
    (``"uint32:5"``) is ``"string:"`` and itself, else it would read as that kind's key; a
    string that is not UTF-8 is ``"string:"`` and base64 (which has no ``:``)."""
    if key.kind == HeaderKind.STRING and isinstance(text := key.to_python(), str):
        prefix, colon, _ = text.partition(":")
        if not (colon and (prefix in _KIND_NAMES or prefix.startswith("kind_"))):
            return text
    return f"{kind_name(key.kind)}:{field_text(key)}"


_KIND_NAMES = frozenset(kind.name.lower() for kind in HeaderKind)


def _pack(kind: HeaderKind, v: Any) -> bytes:
    _check_type(kind, v)
    if kind in (HeaderKind.RAW, HeaderKind.STRING):
        return _sized(bytes(v) if kind == HeaderKind.RAW else v.encode())
    if kind in (HeaderKind.INT128, HeaderKind.UINT128):
        return v.to_bytes(16, "little", signed=kind == HeaderKind.INT128)
    return struct.pack(_FORMATS[kind], v)


_FLOAT_KINDS = (HeaderKind.FLOAT32, HeaderKind.FLOAT64)
_TAKES: dict[HeaderKind, tuple[tuple[type, ...], str]] = {
    HeaderKind.RAW: ((bytes, bytearray, memoryview), "bytes"),
    HeaderKind.STRING: ((str,), "text"),
    HeaderKind.BOOL: ((bool,), "a bool"),
}


def _check_type(kind: HeaderKind, v: Any) -> None:
    """Raises TypeError when ``v`` is not of a type ``kind`` takes: bytes for RAW, text for
    STRING, a bool for BOOL, an int for an integer kind, an int or a float for a float kind
    (a bool is no number here); nothing is converted (``int("7")``, ``bytes(5)`` or a float
    cut to an int would send another value than the one given)."""
    types, wanted = _TAKES.get(kind) or (
        ((int, float), "a number") if kind in _FLOAT_KINDS else ((int,), "an integer"))
    if not isinstance(v, types) or (isinstance(v, bool) and kind != HeaderKind.BOOL):
        raise TypeError(f"a {kind.name.lower()} header value must be {wanted}, "
                        f"not {type(v).__name__}")


def _sized(value: bytes) -> bytes:
    """A raw or string value of 1 to 255 bytes (as Iggy's HeaderValue). Raises ValueError."""
    if not 1 <= len(value) <= MAX_HEADER_FIELD_BYTES:
        raise ValueError(f"{len(value)} bytes: a raw or string header holds 1 to "
                         f"{MAX_HEADER_FIELD_BYTES}")
    return value


Key = HeaderValue | str


def encode_headers(headers: Mapping[Key, HeaderValue]) -> bytes:
    """The block for ``headers``; a ``str`` key means a STRING key. Empty mapping -> b"".

    Raises IggyError (codes as ``validate_headers``) if the result would be invalid.
    """
    w = Writer()
    for key, value in headers.items():
        k = HeaderValue.string(key) if isinstance(key, str) else key
        for field in (k, value):
            w.u8(field.kind).u32(len(field.value)).raw(field.value)
    block = w.done()
    validate_headers(block)
    return block


def decode_headers(block: Buffer) -> dict[HeaderValue, HeaderValue]:
    """Parse and validate a block. Raises WireError with the codes of ``validate_headers``."""
    fields = _read_fields(block)
    pairs = iter(fields)
    return dict(zip(pairs, pairs))


def validate_headers(block: Buffer) -> None:
    """Check a block against the 0.8 rules; raises WireError (see the module docstring)."""
    _read_fields(block)


def _read_fields(block: Buffer) -> list[HeaderValue]:
    """Structural pass over every TLV first, then the kind/size checks (the 0.8 order)."""
    if len(block) > MAX_USER_HEADERS_BYTES:
        raise WireError(f"user headers of {len(block)} bytes",
                        code=ErrorCode.TOO_BIG_USER_HEADERS)
    r = Reader(block)
    fields: list[tuple[int, HeaderValue]] = []
    while r.remaining:
        fields.append(_read_tlv(r))
    if len(fields) % 2:
        raise WireError(f"odd number of header fields ({len(fields)})", offset=r.pos)
    for i, (start, field) in enumerate(fields):
        _check_kind(field, start, is_key=i % 2 == 0)
    return [field for _, field in fields]


def _read_tlv(r: Reader) -> tuple[int, HeaderValue]:
    start = r.pos
    kind = r.u8("header kind")
    if kind == 0:
        raise WireError("header kind 0", offset=start)
    length = r.u32("header length")
    if not 1 <= length <= MAX_HEADER_FIELD_BYTES:
        raise WireError(f"header field length {length}", offset=start + 1)
    return start, HeaderValue(kind, r.bytes(length, "header field"))


def _check_kind(field: HeaderValue, start: int, is_key: bool) -> None:
    if field.kind > HeaderKind.FLOAT64:
        raise WireError(f"header kind {field.kind}", offset=start,
                        code=ErrorCode.INVALID_HEADER_KIND)
    expected = FIXED_SIZES.get(HeaderKind(field.kind))
    if expected is not None and expected != len(field.value):
        code = ErrorCode.INVALID_HEADER_KEY if is_key else ErrorCode.INVALID_HEADER_VALUE
        raise WireError(f"header kind {field.kind} with {len(field.value)} bytes",
                        offset=start, code=code)
