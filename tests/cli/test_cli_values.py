"""Pure parts of the CLI (no server): argument value parsers, the exit-code mapping,
error messages, tables."""

from __future__ import annotations

import argparse

import pytest

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.headers import HeaderKind, HeaderValue
from lurcher.sdk.cli import values
from lurcher.sdk.cli.errors import describe
from lurcher.sdk.cli.exitcodes import CliError, ExitCode, exit_code_for
from lurcher.sdk.cli.output import human_expiry, human_size, printable, render_table

U64_MAX = (1 << 64) - 1


def test_expiry_and_size() -> None:
    assert values.expiry_us("server_default") == 0
    assert values.expiry_us("unlimited") == U64_MAX
    assert values.expiry_us("1day 1hour 1min 1sec") == 90_061_000_000
    assert values.size_bytes("15GB") == 15 * 10**9
    assert values.size_bytes("2MiB") == 2 * 2**20
    assert values.size_bytes("unlimited") == U64_MAX
    for bad, parse in (("soon", values.expiry_us), ("12XB", values.size_bytes)):
        with pytest.raises(argparse.ArgumentTypeError):
            parse(bad)
    assert human_expiry(U64_MAX) == "unlimited" and human_expiry(3_600_000_000) == "1h"
    assert human_size(1500) == "1.50 KB" and human_size(U64_MAX) == "unlimited"


def test_headers_and_ids() -> None:
    parsed = values.headers("a:string:x,y,b:uint8:7,c:raw:0x0aff,d:bool:true")
    assert parsed == [("a", HeaderValue.string("x,y")),
                      ("b", HeaderValue.of(HeaderKind.UINT8, 7)),
                      ("c", HeaderValue.of(HeaderKind.RAW, b"\x0a\xff")),
                      ("d", HeaderValue.of(HeaderKind.BOOL, True))]
    assert values.headers("url:string:http://x:80") == [("url", HeaderValue.string("http://x:80"))]
    for bad in ("nokind", "k:int8:999", "k:bool:maybe", ":string:x", "k:string:", "k:raw:",
                "k:string:" + "x" * 256, "k" * 256 + ":string:x", "\udcff:string:x"):
        with pytest.raises(argparse.ArgumentTypeError):
            values.headers(bad)
    assert values.message_id("0x10") == 16
    assert values.message_id("00000000-0000-0000-0000-000000000001") == 1
    assert values.timestamp_us("1970-01-01T00:00:01Z") == 1_000_000


def test_permissions_flags() -> None:
    g = values.global_permissions("m_srv,read_users")
    assert g.manage_servers and g.read_users and not g.send_messages
    sid, s = values.stream_permissions("4:manage_stream,r_top#1:s_msg,p_msg#2:m_top")
    assert sid == 4 and s.manage_stream and s.read_topics
    assert s.topics[1].send_messages and s.topics[1].poll_messages and s.topics[2].manage_topic
    with pytest.raises(argparse.ArgumentTypeError):
        values.stream_permissions("x:m_str")


def test_exit_codes_and_messages() -> None:
    assert exit_code_for(ErrorCode.TOPIC_NAME_NOT_FOUND) == ExitCode.NOT_FOUND
    assert exit_code_for(ErrorCode.USER_ALREADY_EXISTS) == ExitCode.ALREADY_EXISTS
    assert exit_code_for(ErrorCode.INVALID_CREDENTIALS) == ExitCode.CREDENTIALS
    assert exit_code_for(ErrorCode.INVALID_PERSONAL_ACCESS_TOKEN) == ExitCode.CREDENTIALS
    assert exit_code_for(ErrorCode.PERSONAL_ACCESS_TOKEN_EXPIRED) == ExitCode.AUTHENTICATION
    assert exit_code_for(ErrorCode.INVALID_USERNAME) == ExitCode.INPUT
    assert exit_code_for(ErrorCode.UNAUTHORIZED) == ExitCode.PERMISSION
    assert exit_code_for(ErrorCode.CANNOT_ESTABLISH_CONNECTION) == ExitCode.CONNECTION
    assert exit_code_for(ErrorCode.FEATURE_UNAVAILABLE) == ExitCode.ERROR
    args = argparse.Namespace(stream="x", topic="t")
    err = describe(IggyError(ErrorCode.STREAM_NAME_NOT_FOUND), args)
    assert err.render() == "error: stream 'x' not found (StreamNameNotFound, 1010)"
    # a template whose fields the command lacks falls back to the status reason
    err = describe(IggyError(ErrorCode.PARTITION_NOT_FOUND), argparse.Namespace())
    assert err.render() == "error: partition not found (PartitionNotFound, 3007)"


def test_render_table() -> None:
    assert render_table(("ID", "NAME"), [(1, "a"), (22, "bb")]).splitlines() == [
        "ID  NAME", "1   a", "22  bb"]
    assert render_table(("ID", "NAME"), [(1, "a\nb\x1b")]).splitlines() == [
        "ID  NAME", "1   a\\nb\\x1b"]


def test_printable_escapes_control_characters_only() -> None:
    assert printable("tab\tnl\ncr\resc\x1bdel\x7fc1\x9b") == (
        "tab\\tnl\\ncr\\resc\\x1bdel\\x7fc1\\x9b")
    assert printable("plain, ünïcödé and 日本 stay") == "plain, ünïcödé and 日本 stay"


def test_expiry_arguments_take_months_and_years_as_iggy_does() -> None:
    """`topic create ... 1M` made a topic whose messages expired after one minute (Iggy's
    humantime reads "M" as a month), and `pat create t 1y` was refused."""
    assert values.expiry_us("1M") == 2_630_016 * 10**6
    assert values.expiry_us("1y") == 31_557_600 * 10**6
    assert values.expiry_us("9000years") == 9000 * 31_557_600 * 10**6


def test_identifier_arguments_are_ids_or_names_of_1_to_255_bytes() -> None:
    stream = values.identifier_arg("stream")
    assert stream("orders") == "orders" and stream("7") == "7"
    assert stream("é" * 127) == "é" * 127  # 254 bytes
    for bad in ("", "x" * 256, "é" * 128, "\udcff"):
        with pytest.raises(CliError) as err:
            stream(bad)
        assert err.value.exit_code == ExitCode.USAGE
        assert err.value.message.startswith("argument stream: ")
