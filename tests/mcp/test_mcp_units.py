"""lurcher-mcp pieces without sockets or processes: config loading, start-up errors of the
entry point, the gate, rendering and limits, tool schemas."""

from __future__ import annotations

import json

import pytest

from lurcher.core.wire.headers import HeaderKind, HeaderValue, encode_headers
from lurcher.core.wire.responses.messages import Message, PolledMessages
from lurcher.mcp_server import cli
from lurcher.mcp_server.config import ConfigError, LimitsConfig, PermissionsConfig, load_config
from lurcher.mcp_server.gate import Access, Gate, GateRefused
from lurcher.mcp_server.render import dumps, fit, render_payload, render_polled
from lurcher.mcp_server.tools import TOOLS


def test_config_file_then_env(tmp_path) -> None:
    path = tmp_path / "mcp.toml"
    path.write_text('transport = "stdio"\n[iggy]\naddress = "10.0.0.1:8090"\n'
                    '[permissions]\ndelete = false\n[http.cors]\nenabled = true\n')
    config = load_config(path, {"LURCHER_MCP_IGGY_ADDRESS": "10.0.0.2:8090",
                                "LURCHER_MCP_HTTP_CORS_ALLOWED_ORIGINS": "http://a, http://b",
                                "LURCHER_MCP_LIMITS_MAX_MESSAGES": "7"})
    assert (config.transport, config.iggy.address) == ("stdio", "10.0.0.2:8090")
    assert config.permissions.delete is False and config.http.cors.enabled
    assert config.http.cors.allowed_origins == ["http://a", "http://b"]
    assert config.limits.max_messages == 7


@pytest.mark.parametrize("env", [{"LURCHER_MCP_TRANSPORT": "sse"},
                                 {"LURCHER_MCP_HTTP_PATH": "/"},
                                 {"LURCHER_MCP_LIMITS_MAX_MESSAGES": "0"},
                                 {"LURCHER_MCP_PERMISSIONS_READ": "maybe"},
                                 {"LURCHER_MCP_HTTP_CORS_ALLOWED_ORIGINS": "[1,2"},
                                 {"LURCHER_MCP_IGGY_ADDRESS": "127.0.0.1:abc"},
                                 {"LURCHER_MCP_HTTP_ADDRESS": "127.0.0.1:99999"},
                                 {"LURCHER_MCP_HTTP_HEADER_TIMEOUT_S": "nan"},
                                 {"LURCHER_MCP_HTTP_BODY_TIMEOUT_S": "inf"},
                                 {"LURCHER_MCP_HTTP_BODY_MIN_RATE": "-1"},
                                 {"LURCHER_MCP_HTTP_BODY_MIN_RATE": "nan"},
                                 {"LURCHER_MCP_HTTP_MAX_CONNECTIONS": "-1"},
                                 {"LURCHER_MCP_HTTP_MAX_REQUEST_BYTES": "0"},
                                 {"LURCHER_MCP_HTTP_MAX_SESSIONS": "0"},
                                 {"LURCHER_MCP_HTTP_SESSION_IDLE_TIMEOUT_S": "inf"}])
def test_config_rejects(env) -> None:
    with pytest.raises(ConfigError):
        load_config(None, env)


@pytest.mark.parametrize("name, suggested", [
    ("LURCHER_MCP_IGGY_ADRESS", "LURCHER_MCP_IGGY_ADDRESS"),
    ("LURCHER_MCP_PERMISSION_CREATE", "LURCHER_MCP_PERMISSIONS_CREATE"),
    ("LURCHER_MCP_LIMITS", None)])  # a section, not a key
def test_a_variable_naming_no_key_is_refused_in_one_line(name, suggested) -> None:
    """A misspelt variable used to be ignored: the server ran on the default it meant to
    change."""
    with pytest.raises(ConfigError) as refused:
        load_config(None, {name: "x"})
    message = str(refused.value)
    assert message.startswith(f"{name} names no configuration key") and "\n" not in message
    assert suggested is None or message.endswith(f"did you mean {suggested}?")


def _tls_without_cert(tmp_path) -> dict[str, str]:
    (tmp_path / "key.pem").write_text("")
    return {"LURCHER_MCP_HTTP_ADDRESS": "127.0.0.1:0", "LURCHER_MCP_HTTP_TLS_ENABLED": "true",
            "LURCHER_MCP_HTTP_TLS_CERT_FILE": str(tmp_path / "missing.pem"),
            "LURCHER_MCP_HTTP_TLS_KEY_FILE": str(tmp_path / "key.pem")}


@pytest.mark.parametrize("case", ["cors", "utf8", "http_port", "iggy_port", "tls",
                                  "auth_token", "connection_string"])
def test_startup_errors_are_one_line_and_exit_2(case, tmp_path, monkeypatch, capsys) -> None:
    """Bad configuration (a broken JSON list, a config file that is not UTF-8, an address
    with a bad port, a missing TLS certificate, a connection string without '://') ends
    lurcher-mcp with one "cannot start" line and exit status 2: no traceback, nothing
    announced as serving, and no password (the connection string's was printed whole)."""
    (tmp_path / "bad.toml").write_bytes(b'transport = "http"\n\xff\xfe = 1\n')
    env = {"cors": {"LURCHER_MCP_HTTP_CORS_ALLOWED_ORIGINS": "[1,2"},
           "utf8": {"LURCHER_MCP_CONFIG_PATH": str(tmp_path / "bad.toml")},
           "http_port": {"LURCHER_MCP_TRANSPORT": "stdio",
                         "LURCHER_MCP_HTTP_ADDRESS": "127.0.0.1:99999"},
           "iggy_port": {"LURCHER_MCP_IGGY_ADDRESS": "127.0.0.1:abc",
                         **_tls_without_cert(tmp_path)},
           "tls": _tls_without_cert(tmp_path),
           "auth_token": {"LURCHER_MCP_HTTP_ADDRESS": "127.0.0.1:0",
                          "LURCHER_MCP_HTTP_AUTH_TOKEN": f"file:{tmp_path / 'no-token'}"},
           "connection_string": {"LURCHER_MCP_IGGY_CONNECTION_STRING":
                                 "iggy:/agent:pw-SECRET@127.0.0.1:8090"}}[case]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["--transport", "http"]) == cli.CONFIG_ERROR_EXIT
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("lurcher-mcp: cannot start: "), lines
    assert {"cors": "LURCHER_MCP_HTTP_CORS_ALLOWED_ORIGINS", "utf8": "bad.toml",
            "http_port": "http.address", "iggy_port": "iggy.address",
            "tls": "No such file", "auth_token": "cannot read token file",
            "connection_string": "missing '://'"}[case] in lines[0]
    assert "pw-SECRET" not in lines[0]  # the password is never printed


def test_gate() -> None:
    gate = Gate(PermissionsConfig(create=False))
    gate.check(Access.READ, "x")
    with pytest.raises(GateRefused, match="'create'"):
        gate.check(Access.CREATE, "x")


def test_payload_rendering() -> None:
    assert render_payload(b'{"a": 1}', 100)["payload"] == {"a": 1}
    assert render_payload(b"42", 100)["payload_encoding"] == "text"
    cut = render_payload(("é" * 100).encode(), 11)
    assert cut["payload_truncated"] and cut["payload"] == "é" * 5
    binary = render_payload(bytes(range(256)), 40)
    assert binary["payload_encoding"] == "base64" and len(binary["payload"]) <= 40


def _polled(n: int, payload: bytes, headers: bytes = b"") -> PolledMessages:
    return PolledMessages.of(0, n - 1, [Message(id=i + 1, offset=i, payload=payload,
                                                user_headers=headers) for i in range(n)])


def test_polled_limits() -> None:
    limits = LimitsConfig(max_messages=20, max_response_bytes=2000, max_payload_bytes=500)
    result = render_polled(_polled(100, b"x" * 300), limits, 100)
    assert len(dumps(result)) <= 2000 and 0 < result["count"] < 20
    assert result["next_offset"] == result["count"] and result["truncated"]
    one = render_polled(_polled(1, b"y" * 5000), LimitsConfig(max_response_bytes=1000,
                                                              max_payload_bytes=1000), 1)
    assert one["count"] == 1 and one["messages"][0]["payload_truncated"]
    assert len(dumps(one)) <= 1000


def test_headers_rendered() -> None:
    block = encode_headers({"s": HeaderValue.string("v"),
                            HeaderValue.of(HeaderKind.UINT32, 7): HeaderValue.of(
                                HeaderKind.RAW, b"\x00\xff")})
    headers = render_polled(_polled(1, b"p", block), LimitsConfig(), 1)["messages"][0]["headers"]
    assert headers == {"s": {"kind": "string", "value": "v"},
                       "uint32:7": {"kind": "raw", "value": "AP8="}}


def test_headers_not_utf8_or_of_every_key_kind_are_rendered() -> None:
    """A string key or value that is not UTF-8 (the server stores what a client sent) was
    an internal error of every poll that met it; keys of different kinds never meet."""
    block = encode_headers({HeaderValue(HeaderKind.STRING, b"\xff"): HeaderValue(
                                HeaderKind.STRING, b"\xfe\x00"),
                            "5": HeaderValue.of(HeaderKind.BOOL, True),
                            HeaderValue.of(HeaderKind.INT32, 5): HeaderValue.string("x"),
                            HeaderValue.of(HeaderKind.BOOL, False): HeaderValue.string("y")})
    headers = render_polled(_polled(1, b"p", block), LimitsConfig(), 1)["messages"][0]["headers"]
    assert headers == {"string:/w==": {"kind": "string", "value": "/gA=", "encoding": "base64"},
                       "5": {"kind": "bool", "value": True},
                       "int32:5": {"kind": "string", "value": "x"},
                       "bool:false": {"kind": "string", "value": "y"}}


def test_fit_cuts_lists() -> None:
    value = {"count": 1000, "items": [{"n": i} for i in range(1000)]}
    cut = fit(value, 500)
    assert len(dumps(cut)) <= 500 and cut["truncated"] and cut["total"] == 1000
    assert cut["items"] == value["items"][:cut["returned"]]


def test_every_tool_has_schema_and_description() -> None:
    for spec in TOOLS.values():
        tool = spec.tool()
        assert tool.description and tool.input_schema["type"] == "object"
        json.dumps(tool.input_schema)


def test_fit_preview_counts_escapes_and_utf8() -> None:
    value = {"permissions": {str(i): '"名前"' * 5 for i in range(500)}}
    cut = fit(value, 4096)
    assert len(dumps(cut).encode()) <= 4096 < cut["total_bytes"] == len(dumps(value).encode())
    assert cut["preview"] and dumps(value).startswith(cut["preview"])
