"""Configuration: packaged defaults, file overrides, environment overrides, value parsing."""

import functools

import pytest

from lurcher.runtime.config import U64_MAX, ConfigError, load_config, parse_duration_us, parse_size


def test_packaged_defaults_load_without_a_file():
    config = load_config(environ={})
    assert config.typed.tcp.address == "127.0.0.1:8090"
    assert config.typed.system.segment.size == 1024**3
    assert config.typed.system.topic.message_expiry == U64_MAX


def test_environment_overrides_nested_keys_with_underscores():
    config = load_config(environ={
        "LURCHER_SYSTEM_PARTITION_ENFORCE_FSYNC": "true",
        "LURCHER_TCP_ADDRESS": "127.0.0.1:0",
        "LURCHER_SYSTEM_SEGMENT_SIZE": "1 MiB",
        "LURCHER_PERSONAL_ACCESS_TOKEN_MAX_TOKENS_PER_USER": "7",
    })
    assert config.typed.system.partition.enforce_fsync is True
    assert config.typed.tcp.address == "127.0.0.1:0"
    assert config.typed.system.segment.size == 1024**2
    assert config.typed.personal_access_token.max_tokens_per_user == 7


def test_root_credential_variables_are_not_config_keys():
    config = load_config(environ={"LURCHER_ROOT_PASSWORD": "secret", "LURCHER_ROOT_USERNAME": "x"})
    assert "root" not in config.data


def test_the_cli_variables_of_the_shell_do_not_stop_a_server_from_starting():
    from lurcher.sdk.cli.contexts import CONFIG_ENV
    from lurcher.sdk.cli.options import ENV
    config = load_config(environ={name: "x" for name in (CONFIG_ENV, *ENV.values())})
    assert config.typed.tcp.address == load_config(environ={}).typed.tcp.address


def test_unknown_environment_key_is_a_clear_error():
    with pytest.raises(ConfigError, match="LURCHER_TCP_NOPE"):
        load_config(environ={"LURCHER_TCP_NOPE": "1"})


def test_bad_boolean_is_a_clear_error():
    with pytest.raises(ConfigError, match="expected true or false"):
        load_config(environ={"LURCHER_TCP_ENABLED": "maybe"})


def test_file_overrides_defaults(tmp_path):
    path = tmp_path / "server.toml"
    path.write_text('[system.segment]\nsize = "64 KiB"\n')
    config = load_config(path, environ={})
    assert config.typed.system.segment.size == 64 * 1024
    assert config.typed.tcp.enabled is True


def test_file_not_utf8_is_a_clear_error(tmp_path):
    path = tmp_path / "server.toml"
    path.write_bytes(b"\xff\xfe[system]\n")
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(path, environ={})


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "absent.toml", environ={})


@pytest.mark.parametrize("text,expected", [
    (1234, 1234), ("1234", 1234), ("1 KB", 1000), ("1KiB", 1024), ("1.5 MB", 1_500_000),
    ("1 GiB", 1024**3), ("unlimited", U64_MAX),
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text,expected", [
    (5, 5), ("500 ms", 500_000), ("30 s", 30_000_000), ("1 m", 60_000_000),
    ("1h", 3_600_000_000), ("1 m 30 s", 90_000_000), ("none", U64_MAX),
])
def test_parse_duration(text, expected):
    assert parse_duration_us(text) == expected


@pytest.mark.parametrize("bad", ["lots", "1 parsec", ""])
def test_bad_quantities_are_refused(bad):
    with pytest.raises(ConfigError):
        parse_size(bad)


def test_every_packaged_default_passes_its_own_check():
    """Keys added to configs/server.toml become valid file and env keys by themselves."""
    from lurcher.runtime.config import default_config
    from lurcher.runtime.configcheck import check_file_keys

    check_file_keys(default_config(), default_config(), "the packaged defaults")


@pytest.mark.parametrize("key,kind", [
    ("system.segment.size", "size"), ("system.topic.max_size", "size"),
    ("system.topic.message_expiry", "duration"), ("heartbeat.interval", "duration"),
    ("auth.login_backoff_reset", "duration"),
    ("tcp.address", "address"), ("tcp.enabled", "bool"), ("system.sharding.shards", "int"),
    ("http.cors.allowed_origins", "list"), ("system.io", "choice"), ("system.path", "str"),
])
def test_value_kinds_follow_from_the_defaults(key, kind):
    from lurcher.runtime.configcheck import kind_of

    value = functools.reduce(lambda table, name: table[name], key.split("."),
                             load_config(environ={}).data)
    assert kind_of(key, value) == kind


def test_every_duration_key_takes_durations_and_every_size_key_sizes():
    """The kind of a size or duration key comes from its typed field: auth.login_backoff_reset
    (default "15 m", which reads as a size too) refused "1 h" and "30 s" as "expected a size"
    (found by the docs audit)."""
    from lurcher.runtime.config import default_config
    from lurcher.runtime.configcheck import check_value, key_paths
    from lurcher.runtime.settings import quantity_of

    examples = {"duration": ("1 h", "30 s", "500 ms"), "size": ("3 MiB", "1 GB", "4096")}
    defaults = default_config()
    keys = [k for k in key_paths(defaults, sections=False) if quantity_of(k)]
    assert "auth.login_backoff_reset" in keys and "system.segment.size" in keys
    for key in keys:
        default = functools.reduce(lambda table, name: table[name], key.split("."), defaults)
        for value in examples[quantity_of(key)]:
            check_value(key, value, default, key)  # no ConfigKeyError
    reset = load_config(environ={"LURCHER_AUTH_LOGIN_BACKOFF_RESET": "1 h"})
    assert reset.typed.auth.login_backoff_reset == 3600 * 10**6


def test_unknown_file_key_names_the_nearest_valid_one(tmp_path):
    path = tmp_path / "server.toml"
    path.write_text('[system.segment]\nsise = "1 MiB"\n')
    with pytest.raises(ConfigError, match="unknown key system.segment.sise in .*; did you "
                                          "mean system.segment.size\\?"):
        load_config(path, environ={})


def test_the_mcp_server_s_variables_in_the_environment_do_not_stop_the_server():
    """``LURCHER_MCP_*`` are lurcher-mcp's (often exported in the same shell): the server
    used to refuse to start ("names no configuration key")."""
    config = load_config(environ={"LURCHER_MCP_IGGY_ADDRESS": "127.0.0.1:8090",
                                  "LURCHER_MCP_TRANSPORT": "http"})
    assert config.typed.tcp.address == load_config(environ={}).typed.tcp.address


def test_environment_variable_naming_a_section_is_refused():
    with pytest.raises(ConfigError, match="LURCHER_TCP_TLS names no configuration key"):
        load_config(environ={"LURCHER_TCP_TLS": "true"})


def test_page_cache_window_takes_auto_or_a_size_from_the_environment_and_files(tmp_path):
    """"auto" (any case) is read from the environment and from a file as from the packaged
    default; anything else is refused in one line that names "auto" among what it takes."""
    from lurcher.core.log.host_memory import auto_page_cache_window

    env = "LURCHER_SYSTEM_SEGMENT_PAGE_CACHE_WINDOW"
    for value in ("auto", "Auto"):
        loaded = load_config(environ={env: value}).typed.system.segment.page_cache_window
        assert loaded == auto_page_cache_window()
    assert load_config(environ={env: "2 MiB"}).typed.system.segment.page_cache_window == 2 << 20
    with pytest.raises(ConfigError, match=r'expected a size such as .*, or "auto"$'):
        load_config(environ={env: "fast"})
    path = tmp_path / "server.toml"
    path.write_text('[system.segment]\npage_cache_window = "fast"\n')
    with pytest.raises(ConfigError, match=r'in .*server.toml: expected a size .*, or "auto"$'):
        load_config(path, environ={})
