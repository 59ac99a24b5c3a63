"""``McpConfig``: the configuration of ``lurcher-mcp``, from defaults, a TOML file and the
environment.

Precedence (last wins): the defaults below, the TOML file (``--config`` or
``LURCHER_MCP_CONFIG_PATH``), then ``LURCHER_MCP_<PATH>`` variables, where ``<PATH>`` is a
key's path joined with ``_`` and upper-cased (``LURCHER_MCP_IGGY_ADDRESS``,
``LURCHER_MCP_HTTP_CORS_ALLOWED_ORIGINS``, ``LURCHER_MCP_PERMISSIONS_CREATE``). Variables are
matched against the keys that exist, so keys containing underscores are unambiguous; one
that names no key is refused (``ConfigError``, with the nearest key).

The sections and keys follow Iggy's MCP server (``transport``, ``[http]``, ``[http.cors]``,
``[http.tls]``, ``[iggy]``, ``[iggy.tls]``, ``[permissions]``), so an Iggy MCP config file
works unchanged; ``[iggy]`` adds ``transport`` and ``connection_string``, and ``[limits]``
is ours. Invariant: a loaded config has been validated (``ConfigError`` otherwise).
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from lurcher.core.wire.address import split_address
from lurcher.suggest import nearest

ENV_PREFIX = "LURCHER_MCP_"
CONFIG_PATH_ENV = "LURCHER_MCP_CONFIG_PATH"
MCP_TRANSPORTS = ("stdio", "http")
SERVER_TRANSPORTS = ("tcp", "quic", "http", "ws")
TOKEN_FILE_PREFIX = "file:"


class ConfigError(ValueError):
    """A configuration file, key or value that cannot be used."""


class Section(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Base of every config section (unknown keys are an error, not silently ignored)."""


class CorsConfig(Section):
    enabled: bool = False
    allowed_methods: list[str] = msgspec.field(default_factory=lambda: ["GET", "POST", "DELETE"])
    allowed_origins: list[str] = msgspec.field(default_factory=lambda: ["*"])
    allowed_headers: list[str] = msgspec.field(
        default_factory=lambda: ["content-type", "mcp-session-id", "mcp-protocol-version"])
    exposed_headers: list[str] = msgspec.field(default_factory=lambda: ["mcp-session-id"])
    allow_credentials: bool = False
    allow_private_network: bool = False


class HttpTlsConfig(Section):
    enabled: bool = False
    cert_file: str = ""
    key_file: str = ""


class HttpConfig(Section):
    address: str = "127.0.0.1:8082"
    path: str = "/mcp"
    # ours: read deadlines of a request's header and between pieces of its body, and the
    # least average rate of a body in bytes a second after body_timeout_s (0: none)
    header_timeout_s: float = 30.0
    body_timeout_s: float = 30.0
    body_min_rate: float = 1024.0
    # ours: connections open at once (0: no count of its own), never more than a quarter of
    # the open-files limit; one beyond it is answered 503 and closed (over TLS: counted from
    # the accept, its handshake bounded by header_timeout_s; one beyond is closed before it)
    max_connections: int = 1024
    # ours: the largest request body (a 413 beyond it); the MCP SDK's default
    max_request_bytes: int = 4 * 1024 * 1024
    # ours: MCP sessions open at once (a new one beyond is answered 503), and how long one
    # with no request in flight is kept (0: until its client ends it)
    max_sessions: int = 1000
    session_idle_timeout_s: float = 1800.0
    # ours: when set, the MCP endpoint answers only requests with "Authorization: Bearer
    # <auth_token>" (or the token read from "file:<path>"); "": anyone who reaches it
    auth_token: str = ""
    cors: CorsConfig = msgspec.field(default_factory=CorsConfig)
    tls: HttpTlsConfig = msgspec.field(default_factory=HttpTlsConfig)


class ServerTlsConfig(Section):
    enabled: bool = False
    ca_file: str = ""
    domain: str = ""


class IggyConfig(Section):
    """How to reach the lurcher (or Iggy) server. ``connection_string``, when set, wins
    over every other key here; ``token`` (a PAT, or ``file:<path>``) wins over
    username/password."""

    address: str = "127.0.0.1:8090"
    transport: str = "tcp"
    username: str = "iggy"
    password: str = "iggy"
    token: str = ""
    consumer: str = "lurcher-mcp"
    connection_string: str = ""
    tls: ServerTlsConfig = msgspec.field(default_factory=ServerTlsConfig)


class PermissionsConfig(Section):
    create: bool = True
    read: bool = True
    update: bool = True
    delete: bool = True


class LimitsConfig(Section):
    """Hard caps on what one tool call or resource read hands back to the model."""

    max_messages: int = 100
    max_response_bytes: int = 65_536
    max_payload_bytes: int = 16_384
    max_send_messages: int = 1_000
    default_poll_count: int = 10
    resource_messages: int = 10
    max_listed_topics: int = 200


class McpConfig(Section):
    transport: str = "http"
    http: HttpConfig = msgspec.field(default_factory=HttpConfig)
    iggy: IggyConfig = msgspec.field(default_factory=IggyConfig)
    permissions: PermissionsConfig = msgspec.field(default_factory=PermissionsConfig)
    limits: LimitsConfig = msgspec.field(default_factory=LimitsConfig)

    def validate(self) -> "McpConfig":
        """Check cross-field rules. Returns self; raises ConfigError."""
        for check in _CHECKS:
            problem = check(self)
            if problem:
                raise ConfigError(problem)
        return self


def _check_transport(c: McpConfig) -> str | None:
    if c.transport not in MCP_TRANSPORTS:
        return f"transport must be one of {MCP_TRANSPORTS}, not {c.transport!r}"
    if c.iggy.transport not in SERVER_TRANSPORTS:
        return f"iggy.transport must be one of {SERVER_TRANSPORTS}, not {c.iggy.transport!r}"
    return None


def _check_http(c: McpConfig) -> str | None:
    if not c.http.path.startswith("/") or c.http.path == "/":
        return f"http.path must start with '/' and not be '/' alone, not {c.http.path!r}"
    if c.http.tls.enabled and not (c.http.tls.cert_file and c.http.tls.key_file):
        return "http.tls.enabled needs http.tls.cert_file and http.tls.key_file"
    for key in ("header_timeout_s", "body_timeout_s", "body_min_rate",
                "session_idle_timeout_s"):
        value = getattr(c.http, key)
        if not 0 <= value < math.inf:
            return f"http.{key} must be 0 (none) or a finite number above it, not {value}"
    if c.http.max_connections < 0:
        return f"http.max_connections must be 0 or more, not {c.http.max_connections}"
    for key in ("max_request_bytes", "max_sessions"):
        if getattr(c.http, key) < 1:
            return f"http.{key} must be 1 or more, not {getattr(c.http, key)}"
    return None


def _check_credentials(c: McpConfig) -> str | None:
    i = c.iggy
    if i.connection_string or i.token or (i.username and i.password):
        return None
    return "iggy needs a token or both username and password (or a connection_string)"


def _check_limits(c: McpConfig) -> str | None:
    bad = [k for k in LimitsConfig.__struct_fields__ if getattr(c.limits, k) < 1]
    if bad:
        return f"limits must be positive: {', '.join(bad)}"
    if c.limits.max_payload_bytes > c.limits.max_response_bytes:
        return "limits.max_payload_bytes cannot exceed limits.max_response_bytes"
    return None


def _check_addresses(c: McpConfig) -> str | None:
    """http.address when serving over HTTP, iggy.address unless a connection string wins."""
    checked = [("http.address", c.http.address)] if c.transport == "http" else []
    if not c.iggy.connection_string:
        checked.append(("iggy.address", c.iggy.address))
    for key, address in checked:
        try:
            split_address(address)
        except ValueError as e:
            return f"{key}: {e}"
    return None


_CHECKS = (_check_transport, _check_http, _check_credentials, _check_limits, _check_addresses)


# -- loading ----------------------------------------------------------------------------------

def load_config(path: str | Path | None = None,
                environ: Mapping[str, str] | None = None) -> McpConfig:
    """Defaults, then the TOML file (``path``, else ``LURCHER_MCP_CONFIG_PATH`` if set), then
    ``LURCHER_MCP_*`` variables of ``environ`` (default ``os.environ``). Raises ConfigError."""
    env = os.environ if environ is None else environ
    path = path or env.get(CONFIG_PATH_ENV) or None
    data: dict[str, Any] = read_toml(Path(path)) if path else {}
    apply_env(data, env)
    try:
        return msgspec.convert(data, McpConfig, strict=False).validate()
    except msgspec.ValidationError as e:
        raise ConfigError(f"invalid configuration: {e}") from None


def read_toml(path: Path) -> dict[str, Any]:
    """The file as a dict. Raises ConfigError when missing, not UTF-8 or not TOML."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"cannot read config file {path}: {e}") from None


def env_keys(struct: type[msgspec.Struct] = McpConfig,
             prefix: tuple[str, ...] = ()) -> dict[str, tuple[tuple[str, ...], Any]]:
    """``LURCHER_MCP_<PATH>`` -> (key path, leaf type) for every leaf key of the config."""
    out: dict[str, tuple[tuple[str, ...], Any]] = {}
    for field in msgspec.structs.fields(struct):
        path = (*prefix, field.name)
        if isinstance(field.type, type) and issubclass(field.type, msgspec.Struct):
            out |= env_keys(field.type, path)
        else:
            out[ENV_PREFIX + "_".join(path).upper()] = (path, field.type)
    return out


def apply_env(data: dict[str, Any], environ: Mapping[str, str]) -> None:
    """Set every key named by a ``LURCHER_MCP_*`` variable in ``data`` (in place). Raises
    ConfigError for one that names no key (a typo used to be ignored)."""
    keys = env_keys()
    for name in sorted(environ):
        if name.startswith(ENV_PREFIX) and name != CONFIG_PATH_ENV and name not in keys:
            raise ConfigError(f"{name} names no configuration key"
                              f"{nearest(name, [*keys, CONFIG_PATH_ENV])}")
    for name, (path, leaf) in keys.items():
        if name in environ:
            node = data
            for part in path[:-1]:
                node = node.setdefault(part, {})
            node[path[-1]] = env_value(environ[name], leaf, name)


def env_value(text: str, leaf: Any, name: str) -> Any:
    """A variable's text as the leaf's type: lists are comma-separated (or a JSON array);
    bools and ints are left as text for msgspec's lax conversion. Raises ConfigError for a
    list starting with ``[`` that is not JSON."""
    if getattr(leaf, "__origin__", None) is list:
        stripped = text.strip()
        if stripped.startswith("["):
            try:
                return msgspec.json.decode(stripped)
            except msgspec.DecodeError as e:
                raise ConfigError(f"{name} is not a JSON array: {e}") from None
        return [part.strip() for part in stripped.split(",") if part.strip()]
    return text


def resolve_token(token: str) -> str:
    """A token (a PAT, ``http.auth_token``) as given, or read (stripped) from
    ``file:<path>`` (``~`` expanded).

    Raises ConfigError when the file is missing, unreadable or empty.
    """
    if not token.startswith(TOKEN_FILE_PREFIX):
        return token
    path = Path(token[len(TOKEN_FILE_PREFIX):]).expanduser()
    try:
        value = path.read_text().strip()
    except OSError as e:
        raise ConfigError(f"cannot read token file {path}: {e}") from None
    if not value:
        raise ConfigError(f"token file {path} is empty")
    return value
