"""The arguments of ``Client`` methods, checked before anything is sent.

A bad argument is ``InvalidArgument``: an ``IggyError`` (the SDK's one failure type) and a
``ValueError``, whose message names the argument (or the request field it fills). Its
``code`` is the code of the server's rule for the field where the request's own
``validate()`` has one (a name too long: INVALID_STREAM_NAME, ...), else INVALID_FORMAT (a
number outside its wire type, an unknown name such as a polling strategy). The same holds
over every transport: the checks run on the typed request, before any connection sees it.

Checks cost nothing per message: ``encoded`` checks each field's type (a name given as an
int, permissions as a string: their encoders took any value with an ``encode``), runs
``validate()``, and looks for the field at fault only once the request failed to encode, by
encoding it again with one field at a time made neutral.
"""

from __future__ import annotations

import functools
import struct
import types
from collections.abc import Mapping
from numbers import Integral
from typing import Any

import msgspec

from lurcher.core.wire.codec import Request
from lurcher.core.wire.commands import COMMANDS
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.units import shown
from lurcher.core.wire.validation import check_uint
from lurcher.core.wire.values.consumer import Consumer
from lurcher.core.wire.values.partitioning import Partitioning
from lurcher.core.wire.values.polling import PollingStrategy

ENCODE_ERRORS = (struct.error, OverflowError, ValueError, TypeError, AttributeError)
F = ErrorCode.INVALID_FORMAT
TYPE_WORDS: dict[type, str] = {Integral: "an integer", type(None): "None", str: "a str"}
# A value of each field type that always encodes: put in place of one field to see whether
# that field is the one that does not.
NEUTRAL: dict[type, Any] = {
    int: 0, bool: False, str: "x", bytes: b"", Identifier: Identifier(1),
    Consumer: Consumer.of(1), PollingStrategy: PollingStrategy.next(),
    Partitioning: Partitioning.balanced(),
}


def command_name(code: int) -> str:
    spec = COMMANDS.get(code)
    return spec.name if spec else f"command {code}"


class InvalidArgument(IggyError, ValueError):
    """An argument the request cannot carry or the server's rules refuse; nothing was sent."""


def uint(value: Any, bits: int, name: str) -> int:
    """``value`` when it is an int in ``0..2**bits-1``. Raises InvalidArgument naming ``name``."""
    try:
        check_uint(value, bits, name)
    except IggyError as exc:
        raise InvalidArgument(exc.code, exc.detail) from None
    return value


def named(table: Mapping[str, Any], value: str, name: str) -> Any:
    """``table[value]``. Raises InvalidArgument naming ``name`` and the known names."""
    try:
        return table[value]
    except (KeyError, TypeError):
        raise InvalidArgument(ErrorCode.INVALID_FORMAT, f"{name}: unknown {shown(value)}"
                              f" (expected one of {', '.join(table)})") from None


def encoded(request: Request) -> bytes:
    """The binary form of ``request`` after its ``validate()``. Raises InvalidArgument."""
    check_field_types(request)
    try:
        request.validate()
    except IggyError as exc:
        raise InvalidArgument(exc.code, f"{command_name(request.CODE)}: {exc.detail}") from None
    except ENCODE_ERRORS as exc:  # a value of a type the rule cannot read
        raise unencodable(request, exc) from None
    try:
        return request.encode()
    except IggyError as exc:
        raise InvalidArgument(exc.code, exc.detail) from None
    except ENCODE_ERRORS as exc:
        raise unencodable(request, exc) from None


def check_field_types(request: Request) -> None:
    """Raises InvalidArgument INVALID_FORMAT naming the first field of ``request`` whose
    value is not of the field's type (any integer for an int or a flag: numpy's too)."""
    for name, expected in _field_types(type(request)):
        value = getattr(request, name)
        if not isinstance(value, expected):
            wanted = " or ".join(TYPE_WORDS.get(t, t.__name__) for t in expected)
            raise InvalidArgument(F, f"{name}: {shown(value)} is not {wanted}")


@functools.cache
def _field_types(kind: type) -> tuple[tuple[str, tuple[type, ...]], ...]:
    """(field name, the types ``isinstance`` checks) of a request type; generic types such
    as ``list[int]`` are left to the encoder."""
    checked = []
    for field in msgspec.structs.fields(kind):
        given = field.type
        members = given.__args__ if isinstance(given, types.UnionType) else (given,)
        expected = tuple(Integral if t in (int, bool) else t for t in members)
        try:
            isinstance(None, expected)
        except TypeError:
            continue
        checked.append((field.name, expected))
    return tuple(checked)


def unencodable(request: Request, error: Exception) -> InvalidArgument:
    """The InvalidArgument for ``request``, which failed to encode with ``error``: it names
    the field that has no binary form when one field alone is at fault (INVALID_IDENTIFIER
    for an identifier, as Iggy's SDK: an id outside u32, a name over 255 bytes)."""
    for field in msgspec.structs.fields(request):
        value = getattr(request, field.name)
        neutral = NEUTRAL.get(field.type, NEUTRAL.get(type(value)))
        if neutral is None or value == neutral:
            continue
        try:
            msgspec.structs.replace(request, **{field.name: neutral}).encode()
        except Exception:  # noqa: BLE001 (another field fails too: not this one alone)
            continue
        given = value.id if isinstance(value, Consumer) else value
        code = ErrorCode.INVALID_IDENTIFIER if isinstance(given, Identifier) else F
        given = given.value if isinstance(given, Identifier) else given
        return InvalidArgument(code, f"{field.name}: {shown(given)} does not fit the "
                                     f"request ({error})")
    return InvalidArgument(F, f"{command_name(request.CODE)}: an argument does not fit the "
                              f"request ({error})")


def empty_name_refused(value: Any) -> None:
    """Raises InvalidArgument INVALID_IDENTIFIER for an identifier given as "" (Iggy's
    names are 1..255 bytes; the server would answer it InvalidFormat)."""
    if value == "":
        raise InvalidArgument(ErrorCode.INVALID_IDENTIFIER, "identifier: an empty name")
