"""Strict checks of configuration input against the packaged defaults.

The packaged ``configs/server.toml`` is the schema: a key is valid when it exists there,
and the kind of value it takes follows from its default (a bool, an integer, a list, an
address ``host:port``, a choice from ``CHOICES``, or any string), a string being a size such
as "1 GiB" or a duration such as "30 s" where its typed field says so
(``settings.quantity_of``: a default such as "15 m" reads as both), kept to 0..U64_MAX. A
key added to the defaults is therefore valid everywhere at once (file and environment).
Errors are one line naming the key, the value given and what is expected; unknown keys name
the nearest valid one. These checks judge the input (file
and environment) before ``runtime.settings`` decodes the merged tables into typed sections;
the decoder adds the range limits (``max_open_files`` at least 2, ...) and refuses a key
the packaged defaults have but its Struct lacks, so the two cannot drift apart unseen.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping

from lurcher.core.log.io import IO_MODES
from lurcher.core.wire.address import split_address
from lurcher.core.wire import units
from lurcher.logsetup import FORMATS, LEVELS
from lurcher.runtime import settings
from lurcher.suggest import nearest

CHOICES: dict[str, tuple[str, ...]] = {
    "system.io": IO_MODES,
    "system.logging.level": LEVELS,
    "system.logging.format": FORMATS,
}
# Keys with one supported value: another value would be accepted and silently do nothing.
FIXED: dict[str, tuple[Any, str]] = {
    "tcp.socket.nodelay": (True, "asyncio sets TCP_NODELAY on every connection"),
    "http.jwt.algorithm": ("HS256", "the only JWT algorithm implemented"),
}
EXPECTED = {
    "bool": "true or false",
    "int": "an integer",
    "float": "a number",
    "list": "a list",
    "str": "a string",
    "size": 'a size such as 1048576, "512 KiB" or "1 GB"',
    "duration": 'a duration such as "30 s", "500 ms", "1 h" or "none"',
    "address": 'an address "host:port" such as "127.0.0.1:8090" (port 0 picks a free port)',
}


class ConfigKeyError(ValueError):
    """An unknown key or a value of the wrong kind (the message is one line)."""


def key_paths(tree: Mapping[str, Any], prefix: str = "", sections: bool = True) -> Iterator[str]:
    """Every dotted key path of ``tree``; section paths too when ``sections``."""
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if sections or not isinstance(value, Mapping):
            yield path
        if isinstance(value, Mapping):
            yield from key_paths(value, path + ".", sections)


def check_file_keys(override: Mapping[str, Any], defaults: Mapping[str, Any],
                    origin: str) -> None:
    """Refuse keys of a config file that the defaults do not have; check every value."""
    _check_section(override, defaults, origin, "", list(key_paths(defaults)))


def _check_section(override: Mapping[str, Any], defaults: Mapping[str, Any], origin: str,
                   prefix: str, known: list[str]) -> None:
    for key, value in override.items():
        path = f"{prefix}{key}"
        if key not in defaults:
            raise ConfigKeyError(f"unknown key {path} in {origin}{nearest(path, known)}")
        default = defaults[key]
        if isinstance(default, Mapping) != isinstance(value, Mapping):
            what = (f"a section [{path}]" if isinstance(default, Mapping)
                    else EXPECTED.get(kind_of(path, default), "a value"))
            raise ConfigKeyError(f"{path} = {units.shown(value)} in {origin}: expected {what}")
        if isinstance(default, Mapping):
            _check_section(value, default, origin, path + ".", known)
        else:
            check_value(path, value, default, f"{path} = {units.shown(value)} in {origin}")


def kind_of(path: str, default: Any) -> str:
    """The kind of value ``path`` takes, from its default."""
    if isinstance(default, bool):
        return "bool"
    for kind in ("int", "float", "list"):
        if type(default).__name__ == kind:
            return kind
    if path in CHOICES:
        return "choice"
    if path.rsplit(".", 1)[-1] == "address":
        return "address"
    if path == "system.umask":  # octal text ("077"), checked by server.file_umask
        return "str"
    return settings.quantity_of(path) or "str"


def _u64(parse: Callable[[Any], int]) -> Callable[[Any], int]:
    """``parse`` (a size's or a duration's) refusing what does not fit the u64 the value is
    kept in: an integer in a file is taken as it is, and a duration of -1 µs made a periodic
    job spin and dropped every client. The returned parser raises ValueError."""
    def parse_u64(value: Any) -> int:
        parsed = parse(value)
        if not 0 <= parsed <= units.U64_MAX:
            raise ValueError(f"{value!r} outside 0..{units.U64_MAX}")
        return parsed
    return parse_u64


def _parses(parse: Any, value: Any) -> bool:
    try:
        parse(value)
    except (ValueError, TypeError, AttributeError):
        return False
    return True


def check_value(path: str, value: Any, default: Any, shown: str) -> None:
    """Raise ConfigKeyError(``shown``: expected ...) unless ``value`` suits ``path``."""
    if path in FIXED and value != FIXED[path][0]:
        supported, why = FIXED[path]
        raise ConfigKeyError(f"{shown}: only {_toml(supported)} is supported ({why})")
    kind = kind_of(path, default)
    if not _valid(kind, path, value):
        expected = (f"one of {', '.join(CHOICES[path])}" if kind == "choice"
                    else EXPECTED[kind])
        mark = settings.quantity_mark(path)
        if mark is not None and mark.also:  # e.g. page_cache_window: a size, or "auto"
            expected += f", or {mark.also}"
        raise ConfigKeyError(f"{shown}: expected {expected}")


def _valid(kind: str, path: str, value: Any) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "list":
        return isinstance(value, list)
    if kind == "choice":
        return value in CHOICES[path]
    if kind == "address":
        return isinstance(value, str) and _parses(split_address, value)
    if kind in ("size", "duration"):
        parse = _u64(settings.quantity_mark(path).parse)  # the decoder's own parser
        return (isinstance(value, (int, str)) and not isinstance(value, bool)
                and _parses(parse, value))
    return isinstance(value, str)


def _toml(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else repr(value)
