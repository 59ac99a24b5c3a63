"""Loading the server configuration: packaged defaults, an optional TOML file, then
environment overrides, decoded once into the typed ``ServerConfig`` (``runtime.settings``).

Precedence (last wins): the packaged ``configs/server.toml``, the file given with
``--config`` (or ``LURCHER_CONFIG_PATH``), then ``LURCHER_<SECTION>_<KEY>`` variables. An
environment variable names a key by its path joined with ``_`` and upper-cased; the path is
resolved against the keys that exist, so keys containing underscores work
(``LURCHER_SYSTEM_PARTITION_ENFORCE_FSYNC``). Values are coerced to the type of the default.
Every key and value, from the file or the environment, is checked against the defaults
(``configcheck``): unknown keys and values of the wrong kind raise ConfigError with one line
naming the key. Human sizes ("1 GiB", "500 MB") and durations ("30 s", "1 m", "none") are parsed
by ``core.wire.units`` (``parse_size`` and ``parse_duration_us`` here raise ConfigError).

``Config`` holds the merged tables (``data``: what the diagnostic snapshot shows and what a
shard process is started with) and their decoding (``typed``), which is what everything
reads: there are no dotted accessors, so a key is read with its type or not at all.
"""

from __future__ import annotations

import copy
import functools
import os
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from lurcher.core.wire import units
from lurcher.runtime import configcheck, settings
from lurcher.suggest import nearest

ENV_PREFIX = "LURCHER_"
U64_MAX = units.U64_MAX  # re-exported for configuration users
NOT_CONFIG_ENV = {"LURCHER_CONFIG_PATH", "LURCHER_ROOT_USERNAME", "LURCHER_ROOT_PASSWORD",
                  # the CLI's own (lurcher.sdk.cli), often set in the shell that starts a server
                  "LURCHER_CLI_CONFIG", "LURCHER_CONNECTION", "LURCHER_CONTEXT",
                  "LURCHER_USERNAME", "LURCHER_PASSWORD", "LURCHER_TOKEN"}
# variables of other programs of the package, often set in the same shell
NOT_CONFIG_ENV_PREFIXES = ("LURCHER_MCP_",)  # lurcher-mcp's (``mcp_server.config``)



class ConfigError(ValueError):
    """A configuration value or file that cannot be used."""


def parse_size(value: int | str) -> int:
    """Bytes from an int or a string like "1 GiB"; "unlimited" -> U64_MAX. Raises ConfigError."""
    try:
        return units.parse_size(value)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def parse_duration_us(value: int | str) -> int:
    """Microseconds from an int (µs) or "30 s", "1 m", "500 ms"; "none"/"unlimited" -> U64_MAX.
    Raises ConfigError."""
    try:
        return units.parse_duration_us(value)
    except ValueError as exc:
        raise ConfigError(f"not a duration: {exc}") from None


def default_config() -> dict[str, Any]:
    """The packaged defaults as a nested dict (a fresh copy)."""
    return copy.deepcopy(_packaged())


@functools.cache
def _packaged() -> dict[str, Any]:
    text = resources.files("lurcher").joinpath("configs/server.toml").read_text()
    return tomllib.loads(text)


def merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge ``override`` into a copy of ``base``."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def _coerce(raw: str, default: Any) -> Any:
    """An environment string as the type of ``default`` where it reads as one; else ``raw``
    (``check_value`` then names what was expected)."""
    if isinstance(default, bool):
        words = {"1": True, "true": True, "yes": True, "on": True,
                 "0": False, "false": False, "no": False, "off": False}
        return words.get(raw.strip().lower(), raw)
    for kind in (int, float):
        if type(default) is kind:
            try:
                return kind(raw)
            except ValueError:
                return raw
    if isinstance(default, list):
        return [item.strip() for item in raw.split(",") if item.strip()]
    return raw


def _resolve(tree: dict[str, Any], tokens: list[str]) -> list[str] | None:
    """The path of the leaf key in ``tree`` spelled by ``tokens`` (lower-case words), or None."""
    for cut in range(len(tokens), 0, -1):
        key = "_".join(tokens[:cut])
        if key not in tree:
            continue
        if cut == len(tokens):
            if not isinstance(tree[key], dict):
                return [key]
            continue
        if isinstance(tree[key], dict):
            rest = _resolve(tree[key], tokens[cut:])
            if rest is not None:
                return [key, *rest]
    return None


def env_name(dotted: str) -> str:
    """The environment variable of a dotted key: ``tcp.address`` -> ``LURCHER_TCP_ADDRESS``."""
    return ENV_PREFIX + dotted.replace(".", "_").upper()


def apply_env(config: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """Apply LURCHER_* overrides. Raises ConfigError for a variable naming no key or a value
    of the wrong kind."""
    out = copy.deepcopy(config)
    for name, raw in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX) or name in NOT_CONFIG_ENV or \
                name.startswith(NOT_CONFIG_ENV_PREFIXES):
            continue
        path = _resolve(out, name[len(ENV_PREFIX):].lower().split("_"))
        if path is None:
            known = [env_name(p) for p in configcheck.key_paths(config, sections=False)]
            raise ConfigError(f"{name} names no configuration key"
                              f"{nearest(name, known)}")
        node = out
        for key in path[:-1]:
            node = node[key]
        value = _coerce(raw, node[path[-1]])
        try:
            dotted = ".".join(path)
            configcheck.check_value(dotted, value, node[path[-1]],
                                    f"{name}={units.shown(raw)} ({dotted})")
        except configcheck.ConfigKeyError as exc:
            raise ConfigError(str(exc)) from None
        node[path[-1]] = value
    return out


def load_config(path: str | os.PathLike[str] | None = None,
                environ: Mapping[str, str] | None = None) -> "Config":
    """Defaults + file + environment. Raises ConfigError for unreadable or invalid input."""
    environ = os.environ if environ is None else environ
    data = default_config()
    path = path or environ.get("LURCHER_CONFIG_PATH")
    if path:
        try:
            override = tomllib.loads(Path(path).read_text())
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from None
        try:
            configcheck.check_file_keys(override, data, str(path))
        except configcheck.ConfigKeyError as exc:
            raise ConfigError(str(exc)) from None
        data = merge(data, override)
    return Config(apply_env(data, environ))


class Config:
    """The merged configuration tables and their typed decoding.

    ``Config(tables)`` takes tables already checked by ``load_config`` (or a part of them, as
    tests build them: the packaged defaults fill the rest). Raises ConfigError when they do
    not decode."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = merge(_packaged(), data)
        try:
            self.typed: settings.ServerConfig = settings.decode(self.data)
        except settings.SettingsError as exc:
            raise ConfigError(str(exc)) from None

    def merged(self, override: Mapping[str, Any]) -> "Config":
        """A new Config with ``override`` (nested tables) merged over this one."""
        return Config(merge(self.data, override))

    def shards_count(self) -> int:
        """``system.sharding.shards``; 0 means one per CPU core."""
        wanted = self.typed.system.sharding.shards
        return wanted if wanted > 0 else (os.cpu_count() or 1)
