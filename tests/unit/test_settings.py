"""The typed configuration (``runtime.settings``): the packaged defaults decode, sizes and
durations become ints at decode time, bad input is refused in one line naming the key, and
server.toml is the one source of default values."""

from __future__ import annotations

import msgspec
import pytest

from lurcher.cluster.config import ClusterConfig
from lurcher.core.log.config import LogConfig
from lurcher.core.log.files import DEFAULT_MAX_OPEN_FILES
from lurcher.core.log.host_memory import auto_page_cache_window
from lurcher.core.wire.units import U64_MAX
from lurcher.runtime import settings
from lurcher.runtime.config import ConfigError, default_config, load_config

MIB = 1024 * 1024


def test_packaged_defaults_decode_to_typed_sections():
    typed = settings.decode(default_config())
    assert typed.system.segment.size == 1024 * MIB
    assert typed.system.topic.message_expiry == U64_MAX
    assert typed.system.topic.max_size == U64_MAX
    assert typed.system.sharding.heartbeat_timeout == 15_000_000
    assert typed.http.max_request_size == 2_000_000
    assert typed.http.jwt.access_token_expiry == 3_600_000_000
    assert typed.websocket.max_message_size == 64 * MIB
    assert typed.limits.max_unauthenticated_payload_bytes == 64 * 1024
    assert typed.auth.login_backoff_base == 100_000
    assert typed.tcp.address == "127.0.0.1:8090" and typed.tcp.tls.enabled is False
    assert typed.cluster.enabled is False
    assert typed.system.idle_poll == 2000
    for value in (typed.system.segment.size, typed.heartbeat.interval):
        assert type(value) is int  # plain ints: msgspec encodes them anywhere


def test_no_section_field_has_a_default():
    """server.toml is the one source of defaults: every field of every section is required."""
    pending, seen = [settings.ServerConfig], set()
    while pending:
        cls = pending.pop()
        seen.add(cls)
        for field in msgspec.structs.fields(cls):
            assert field.required, f"{cls.__name__}.{field.name} has a default in code"
            kind = field.type
            if isinstance(kind, type) and issubclass(kind, settings.Section) and kind not in seen:
                pending.append(kind)
    assert settings.Jwt in seen and settings.Cleaner in seen


def test_library_defaults_equal_the_packaged_ones():
    """Structs used outside the server keep defaults of their own; they match server.toml."""
    typed = settings.decode(default_config())
    cluster = msgspec.structs.asdict(typed.cluster)
    defaults = msgspec.structs.asdict(ClusterConfig())
    assert {k: v for k, v in cluster.items() if k != "node"} == {
        k: v for k, v in defaults.items() if k != "node"}
    log = LogConfig()
    assert log.segment_size_bytes == typed.system.segment.size
    assert log.enforce_fsync == typed.system.partition.enforce_fsync
    assert log.max_inflight_batches == typed.system.partition.max_inflight_batches
    assert log.inline_write_max_bytes == typed.system.partition.inline_write_max_bytes
    assert log.page_cache_window == typed.system.segment.page_cache_window
    assert log.reserve_ahead == typed.system.segment.reserve_ahead
    assert DEFAULT_MAX_OPEN_FILES == typed.system.segment.max_open_files
    # the SDK's QUIC options default to the server's [quic] values
    from lurcher.core.quic import QuicSettings
    from lurcher.transports.quic import section_settings
    assert QuicSettings() == section_settings(typed.quic)


def test_unknown_key_is_refused_with_the_nearest_known_one(tmp_path):
    path = tmp_path / "server.toml"
    path.write_text("[auth]\nargon2_time_cots = 3\n")
    with pytest.raises(ConfigError) as e:
        load_config(path, environ={})
    assert str(e.value) == (f"unknown key auth.argon2_time_cots in {path}; "
                            "did you mean auth.argon2_time_cost?")
    with pytest.raises(ConfigError, match="LURCHER_AUTH_ARGON2_TIME_COTS names no configuration "
                                          "key; did you mean LURCHER_AUTH_ARGON2_TIME_COST\\?"):
        load_config(environ={"LURCHER_AUTH_ARGON2_TIME_COTS": "3"})


def test_unknown_key_past_the_checks_is_refused_by_the_decoder():
    tables = default_config()
    tables["system"]["segment"]["sise"] = 1
    with pytest.raises(settings.SettingsError, match="^system.segment: object contains unknown "
                                                     "field `sise`$"):
        settings.decode(tables)


@pytest.mark.parametrize("section,key,value", [
    ("websocket", "max_message_size", '"lots"'),
    ("http.jwt", "access_token_expiry", '"soon"'),
    ("system.segment", "size", "true"),
])
def test_bad_size_or_duration_is_one_line_naming_the_key(tmp_path, section, key, value):
    path = tmp_path / "server.toml"
    path.write_text(f"[{section}]\n{key} = {value}\n")
    with pytest.raises(ConfigError) as e:
        load_config(path, environ={})
    message = str(e.value)
    assert f"{section}.{key}" in message and "\n" not in message


@pytest.mark.parametrize("key,value,expected", [
    ("system.segment.size", "lots", "system.segment.size: not a size: 'lots'"),
    ("heartbeat.interval", "soon", "heartbeat.interval: invalid duration 'soon'"),
    ("system.segment.max_open_files", 1, "system.segment.max_open_files: expected `int` >= 2"),
    ("tcp.enabled", "yes", "tcp.enabled: expected `bool`, got `str`"),
    ("system.segment.page_cache_window", "fast",
     "system.segment.page_cache_window: not a size: 'fast' (examples: "),
    ("system.segment.page_cache_window", [1], "system.segment.page_cache_window: expected a "
     "size, got [1]"),
])
def test_decoder_errors_name_the_key_first(key, value, expected):
    tables = default_config()
    node = tables
    *path, leaf = key.split(".")
    for part in path:
        node = node[part]
    node[leaf] = value
    with pytest.raises(settings.SettingsError) as e:
        settings.decode(tables)
    assert str(e.value).startswith(expected)


def test_page_cache_window_auto_is_this_machines_window_and_a_size_is_kept():
    """The packaged default is "auto", decoded to the window ``host_memory`` picks here."""
    assert default_config()["system"]["segment"]["page_cache_window"] == "auto"
    tables = default_config()
    assert settings.decode(tables).system.segment.page_cache_window == auto_page_cache_window()
    tables["system"]["segment"]["page_cache_window"] = "48 MiB"
    assert settings.decode(tables).system.segment.page_cache_window == 48 * 1024 * 1024


def test_a_segment_size_above_1_gib_is_refused_in_one_line():
    """The documented maximum (Iggy 0.8's) was accepted and silently exceeded."""
    assert load_config(environ={"LURCHER_SYSTEM_SEGMENT_SIZE": "1 GiB"}).typed
    with pytest.raises(ConfigError, match="^system.segment.size must be at most 1 GiB "
                                          r"\(1073741824 bytes\), not 1073741825$"):
        load_config(environ={"LURCHER_SYSTEM_SEGMENT_SIZE": "1073741825"})


@pytest.mark.parametrize("expiry, shown", [("500 ms", "0.5"), ("0 s", "0")])
def test_a_token_expiry_below_a_second_is_refused_in_one_line(expiry, shown):
    """A token's expiry is in whole seconds: such tokens were expired when issued."""
    assert load_config(environ={"LURCHER_HTTP_JWT_ACCESS_TOKEN_EXPIRY": "1 s"}).typed
    assert load_config(environ={"LURCHER_HTTP_JWT_ACCESS_TOKEN_EXPIRY": "none"}).typed
    with pytest.raises(ConfigError, match="^http.jwt.access_token_expiry must be at least 1 s "
                                          rf"or none, not {shown} s \(a token's expiry is in "
                                          r"whole seconds\)$"):
        load_config(environ={"LURCHER_HTTP_JWT_ACCESS_TOKEN_EXPIRY": expiry})


@pytest.mark.parametrize("value, shown", [("unlimited", "unlimited"),
                                          ("1073741825", "1073741825")])
def test_a_poll_reply_limit_above_1_gib_is_refused_in_one_line(value, shown):
    """"unlimited" was accepted: one poll could build a reply of gigabytes in memory."""
    assert load_config(environ={"LURCHER_LIMITS_MAX_POLL_REPLY_BYTES": "1 GiB"}).typed
    with pytest.raises(ConfigError, match="^limits.max_poll_reply_bytes must be at most 1 GiB "
                                          rf"\(1073741824 bytes\), not {shown}$"):
        load_config(environ={"LURCHER_LIMITS_MAX_POLL_REPLY_BYTES": value})


@pytest.mark.parametrize("value, shown", [("11 ms", "11000 us"), ("none", "none")])
def test_an_idle_poll_above_10_ms_is_refused_in_one_line(value, shown):
    """Polling that long buys no latency, only a busy core."""
    assert load_config(environ={"LURCHER_SYSTEM_IDLE_POLL": "10 ms"}).typed.system.idle_poll \
        == 10_000
    assert load_config(environ={"LURCHER_SYSTEM_IDLE_POLL": "0"}).typed.system.idle_poll == 0
    with pytest.raises(ConfigError, match=f"^system.idle_poll must be at most 10 ms, not "
                                          f"{shown}$"):
        load_config(environ={"LURCHER_SYSTEM_IDLE_POLL": value})


@pytest.mark.parametrize("interval", ["0", "none"])
def test_an_enabled_message_cleaner_needs_an_interval(interval):
    """With no interval the cleaner never ran: retention silently off."""
    with pytest.raises(ConfigError, match="^data_maintenance.messages.interval must be above "
                                          "0 and not none when cleaner_enabled is true$"):
        load_config(environ={"LURCHER_DATA_MAINTENANCE_MESSAGES_CLEANER_ENABLED": "true",
                             "LURCHER_DATA_MAINTENANCE_MESSAGES_INTERVAL": interval})
    disabled = load_config(environ={"LURCHER_DATA_MAINTENANCE_MESSAGES_INTERVAL": interval})
    assert not disabled.typed.data_maintenance.messages.cleaner_enabled


def test_range_limit_from_the_environment_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="^system.partition.max_partitions: expected `int` "
                                          ">= 1$"):
        load_config(environ={"LURCHER_SYSTEM_PARTITION_MAX_PARTITIONS": "0"})


def test_environment_override_of_an_underscored_key_lands_typed():
    config = load_config(environ={
        "LURCHER_SYSTEM_MESSAGE_DEDUPLICATION_MAX_ENTRIES": "7",
        "LURCHER_AUTH_LOGIN_BACKOFF_BASE": "250 ms",
        "LURCHER_HTTP_JWT_ACCESS_TOKEN_EXPIRY": "2 h",
        "LURCHER_PERSONAL_ACCESS_TOKEN_CLEANER_INTERVAL": "none",
        "LURCHER_LIMITS_MAX_POLL_REPLY_BYTES": "1 MiB",
    })
    typed = config.typed
    assert typed.system.message_deduplication.max_entries == 7
    assert typed.auth.login_backoff_base == 250_000
    assert typed.http.jwt.access_token_expiry == 7_200_000_000
    assert typed.personal_access_token.cleaner.interval == U64_MAX
    assert typed.limits.max_poll_reply_bytes == MIB


def test_merged_config_is_a_new_decoded_config():
    config = load_config(environ={})
    moved = config.merged({"tcp": {"address": "127.0.0.1:9999"}})
    assert moved.typed.tcp.address == "127.0.0.1:9999"
    assert config.typed.tcp.address == "127.0.0.1:8090"
    with pytest.raises(ConfigError, match="^tcp.enabled: expected `bool`"):
        config.merged({"tcp": {"enabled": "maybe"}})


@pytest.mark.parametrize("env, expected", [
    ({"LURCHER_PERSONAL_ACCESS_TOKEN_CLEANER_INTERVAL": "0"},
     "personal_access_token.cleaner.interval must be above 0 when the cleaner is enabled"),
    ({"LURCHER_HEARTBEAT_ENABLED": "true", "LURCHER_HEARTBEAT_INTERVAL": "0"},
     "heartbeat.interval must be above 0 and not none when enabled is true"),
    ({"LURCHER_HEARTBEAT_ENABLED": "true", "LURCHER_HEARTBEAT_INTERVAL": "none"},
     "heartbeat.interval must be above 0 and not none when enabled is true"),
    ({"LURCHER_CONSUMER_GROUP_CHECK_INTERVAL": "0"},
     "consumer_group.check_interval must be above 0 and not none"),
    ({"LURCHER_CONSUMER_GROUP_CHECK_INTERVAL": "none"},
     "consumer_group.check_interval must be above 0 and not none"),
])
def test_a_periodic_job_that_is_on_needs_an_interval(env, expected):
    """Each of these started and never ran (the token cleaner's 0 ran every millisecond):
    expired tokens kept, dead clients never dropped, hand-overs never timed out."""
    with pytest.raises(ConfigError, match=f"^{expected}$"):
        load_config(environ=env)


@pytest.mark.parametrize("env", [
    {"LURCHER_PERSONAL_ACCESS_TOKEN_CLEANER_INTERVAL": "none"},  # documented: cleaner off
    {"LURCHER_PERSONAL_ACCESS_TOKEN_CLEANER_ENABLED": "false",
     "LURCHER_PERSONAL_ACCESS_TOKEN_CLEANER_INTERVAL": "0"},
    {"LURCHER_HEARTBEAT_ENABLED": "false", "LURCHER_HEARTBEAT_INTERVAL": "0"},
])
def test_a_job_that_is_off_may_have_no_interval(env):
    load_config(environ=env)
