"""``lurcher message send`` / ``message poll`` against a real server: every input source,
headers, ids, partitioning, every polling strategy, every output format, and ``--follow``
(background process, messages sent while it runs, stopped by SIGTERM or ``--max``)."""

from __future__ import annotations

import base64
import json
import queue
import signal
import time
from pathlib import Path

import pytest

from lurcher.core.wire.headers import HeaderKind, HeaderValue, encode_headers
from lurcher.sdk.cli.exitcodes import ExitCode
from lurcher.sdk.sync import SyncClient
from tests.cli.conftest import Cli, root_connection, run_capped

FOLLOW_WAIT_S = 15.0


@pytest.fixture
def topic(lurcher: Cli) -> tuple[str, str]:
    lurcher("stream", "create", "orders", check=0)
    lurcher("topic", "create", "orders", "eu", "3", check=0)
    return "orders", "eu"


def poll_json(lurcher: Cli, *args: str) -> list[dict]:
    result = lurcher("message", "poll", "orders", "eu", *args, "--format", "json", check=0)
    return result.json_lines()


def payloads(records: list[dict]) -> list[str]:
    return [r["payload"] for r in records]


def test_send_from_arguments_stdin_file_and_raw(lurcher: Cli, topic, tmp_path: Path) -> None:
    assert "sent 2 message(s)" in lurcher("message", "send", "orders", "eu", "hello",
                                          "big world", "-p", "0", check=0).out
    lurcher("message", "send", "orders", "eu", "-p", "0", input="l1\nl2\r\n\nl3", check=0)
    file = tmp_path / "in.txt"
    file.write_bytes(b"f1\nf2\n")
    lurcher("message", "send", "orders", "eu", "-p", "0", "--input-file", str(file), check=0)
    lurcher("message", "send", "orders", "eu", "-p", "0", "--raw", input="r1\nr2\n", check=0)
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)))
    lurcher("message", "send", "orders", "eu", "-p", "0", "--raw", "--file", str(blob), check=0)
    got = poll_json(lurcher, "0", "--first", "--count", "100")
    assert payloads(got)[:8] == ["hello", "big world", "l1", "l2", "l3", "f1", "f2", "r1\nr2\n"]
    assert got[8]["payload"] is None
    assert base64.b64decode(got[8]["payload_base64"]) == bytes(range(256))
    assert [r["offset"] for r in got] == list(range(9))


def test_send_many_lines_in_batches(lurcher: Cli, topic) -> None:
    lines = "\n".join(f"m{i}" for i in range(250))
    out = lurcher("message", "send", "orders", "eu", "-p", "1", "--batch-size", "100",
                  input=lines, check=0).out
    assert "sent 250 message(s)" in out
    got = poll_json(lurcher, "1", "--first", "-c", "1000")
    assert payloads(got) == [f"m{i}" for i in range(250)]


def test_send_headers_ids_and_key(lurcher: Cli, topic) -> None:
    lurcher("message", "send", "orders", "eu", "-p", "2", "-H", "src:string:web,n:uint32:7",
            "-H", "ok:bool:true", "-H", "blob:raw:0xff00", "-H", "pi:float64:3.5",
            "--id", "42", "a", "--id", "00000000-0000-0000-0000-0000000000ff", "b", check=0)
    got = poll_json(lurcher, "2", "--first", "-c", "10")
    assert [r["id"] for r in got] == [42, 255]
    assert got[0]["headers"] == {"src": "web", "n": 7, "ok": True, "blob": "ff00", "pi": 3.5}
    text = lurcher("message", "poll", "orders", "eu", "2", "--first", "-c", "1",
                   "--show-headers", check=0).out
    assert "src=web" in text and "n=7" in text
    for _ in range(3):
        lurcher("message", "send", "orders", "eu", "--message-key", "customer-1", "k", check=0)
    keyed = [payloads(poll_json(lurcher, str(p), "--first", "-c", "100")).count("k")
             for p in range(3)]
    assert sorted(keyed) == [0, 0, 3]  # one key, one partition


def test_poll_shows_string_headers_that_are_not_utf8(lurcher: Cli, server, topic) -> None:
    """A string header that is not UTF-8 (sent by another client; the server stores it as
    sent) failed every poll that met it with a decode error: it is shown as its bytes."""
    with SyncClient.from_connection_string(root_connection(server)) as sdk:
        sdk.send_messages("orders", "eu", [b"m"], 1, headers=[encode_headers(
            {HeaderValue(HeaderKind.STRING, b"\xff"): HeaderValue(HeaderKind.STRING, b"\xfe")})])
    [got] = poll_json(lurcher, "1", "--first", "-c", "10")
    assert got["headers"] == {"string:/w==": "fe"}  # the key as headers.key_text names it
    text = lurcher("message", "poll", "orders", "eu", "1", "--first", "--show-headers",
                   check=0).out
    assert "{string:/w===fe}" in text


def test_poll_shows_every_header_when_keys_of_different_kinds_read_alike(
        lurcher: Cli, server, topic) -> None:
    """Keys were shown as their plain value, so a string key "5" and a uint32 key 5, or a
    string key "6b" and a raw key b"k" (hex 6b), came out as one key: half the headers
    were missing from the output."""
    block = encode_headers({
        HeaderValue.string("5"): HeaderValue.string("a"),
        HeaderValue.of(HeaderKind.UINT32, 5): HeaderValue.string("b"),
        HeaderValue.string("6b"): HeaderValue.string("c"),
        HeaderValue.of(HeaderKind.RAW, b"k"): HeaderValue.string("d")})
    with SyncClient.from_connection_string(root_connection(server)) as sdk:
        sdk.send_messages("orders", "eu", [b"m"], 1, headers=[block])
    [got] = poll_json(lurcher, "1", "--first")
    assert got["headers"] == {"5": "a", "uint32:5": "b", "6b": "c", "raw:aw==": "d"}


def test_text_output_escapes_control_characters(lurcher: Cli, topic) -> None:
    """Text mode printed payloads and headers with their control characters: a newline
    split a message over two lines and an escape sequence reached the terminal."""
    lurcher("message", "send", "orders", "eu", "-p", "0", "--raw", "-H",
            "note:string:a\x1b[2J\tb", input="one\ntwo\x1b[31m\x00\x9b", check=0)
    [line] = lurcher("message", "poll", "orders", "eu", "0", "--first", "--show-headers",
                     check=0).lines()
    assert line.endswith("] one\\ntwo\\x1b[31m\\x00\\x9b  {note=a\\x1b[2J\\tb}")
    [record] = poll_json(lurcher, "0", "--first")
    assert record["payload"] == "one\ntwo\x1b[31m\x00\x9b"


def test_json_output_of_headers_of_every_kind_is_strict_json(lurcher: Cli, topic) -> None:
    """A float header that is nan or infinite was written as NaN / -Infinity, which is not
    JSON (JSON.parse, serde_json and strict parsers refuse the line); the extremes of the
    128-bit kinds and raw bytes come out exact."""
    i128_min, u128_max = -(1 << 127), (1 << 128) - 1
    lurcher("message", "send", "orders", "eu", "-p", "0", "-H", "nan:float64:nan",
            "-H", "up:float32:inf", "-H", "down:float64:-inf", "-H", f"lo:int128:{i128_min}",
            "-H", f"hi:uint128:{u128_max}", "-H", "blob:raw:00ff", "-H", "yes:bool:true",
            "m", check=0)
    line = lurcher("message", "poll", "orders", "eu", "0", "--first", "--format", "json",
                   check=0).lines()[0]

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")

    headers = json.loads(line, parse_constant=refuse)["headers"]
    assert headers == {"nan": "nan", "up": "inf", "down": "-inf", "lo": i128_min,
                       "hi": u128_max, "blob": "00ff", "yes": True}


def test_poll_strategies(lurcher: Cli, topic) -> None:
    lurcher("message", "send", "orders", "eu", "-p", "0", *[f"p{i}" for i in range(10)],
            check=0)
    assert payloads(poll_json(lurcher, "0", "--first", "-c", "3")) == ["p0", "p1", "p2"]
    assert payloads(poll_json(lurcher, "0", "--offset", "7", "-c", "10")) == ["p7", "p8", "p9"]
    assert payloads(poll_json(lurcher, "0", "--last", "-c", "2")) == ["p8", "p9"]
    stamp = poll_json(lurcher, "0", "--offset", "4", "-c", "1")[0]["timestamp"]
    by_time = poll_json(lurcher, "0", "--timestamp", str(stamp), "-c", "100")
    assert payloads(by_time)[0] in ("p0", "p4")  # one send = one timestamp for the batch
    assert all(r["timestamp"] >= stamp for r in by_time)
    future = lurcher("message", "poll", "orders", "eu", "0", "--timestamp",
                     "2100-01-01T00:00:00Z", "--format", "json", check=0)
    assert future.out == ""
    # next + auto-commit walks forward through stored offsets of consumer 5
    first = poll_json(lurcher, "0", "--next", "-c", "4", "--consumer", "5", "--auto-commit")
    second = poll_json(lurcher, "0", "--next", "-c", "4", "--consumer", "5", "--auto-commit")
    assert payloads(first) == ["p0", "p1", "p2", "p3"]
    assert payloads(second) == ["p4", "p5", "p6", "p7"]
    stored = lurcher("--json", "consumer-offset", "get", "5", "orders", "eu", "0", check=0)
    assert stored.json()["stored_offset"] == 7
    assert payloads(poll_json(lurcher, "0", "-c", "1", "--consumer", "other")) == ["p0"]


def test_poll_output_formats(lurcher: Cli, topic) -> None:
    lurcher("message", "send", "orders", "eu", "-p", "1", "hi", "there", check=0)
    text = lurcher("message", "poll", "orders", "eu", "1", "--first", "-c", "2", check=0)
    assert len(text.lines()) == 2
    assert text.lines()[0].startswith("[partition 1 offset 0 ") and text.lines()[0].endswith("hi")
    hex_out = lurcher("message", "poll", "orders", "eu", "1", "--first", "-c", "2",
                      "--format", "hex", check=0)
    assert hex_out.lines()[0].endswith(b"hi".hex()) and hex_out.lines()[1].endswith(
        b"there".hex())
    raw = lurcher("message", "poll", "orders", "eu", "1", "--first", "-c", "2",
                  "--format", "payload", check=0)
    assert raw.out == "hi\nthere\n"
    global_json = lurcher("--json", "message", "poll", "orders", "eu", "1", "--first", "-c", "2",
                          check=0)
    assert [r["payload"] for r in global_json.json_lines()] == ["hi", "there"]
    empty = lurcher("message", "poll", "orders", "eu", "2", "--first", check=0)
    assert empty.out == "" and "no messages" in empty.err


def _read_lines(proc, n: int) -> list[dict]:
    """Take ``n`` JSON lines from a follow process, failing after FOLLOW_WAIT_S."""
    lines: list[dict] = []
    deadline = time.monotonic() + FOLLOW_WAIT_S
    while len(lines) < n:
        left = deadline - time.monotonic()
        assert left > 0, f"only {len(lines)} of {n} lines arrived: {lines}"
        try:
            line = proc.lines.get(timeout=left)
        except queue.Empty:
            continue
        assert line is not None, f"follow process ended early: {proc.stderr.read()!r}"
        lines.append(json.loads(line))
    return lines


def test_follow_prints_messages_as_they_arrive_until_sigterm(lurcher: Cli, topic, spawn) -> None:
    lurcher("message", "send", "orders", "eu", "-p", "0", "before", check=0)
    proc = spawn("message", "poll", "orders", "eu", "0", "--first", "--follow",
                 "--format", "json", "--interval", "0.05")
    assert payloads(_read_lines(proc, 1)) == ["before"]
    lurcher("message", "send", "orders", "eu", "-p", "0", "live1", "live2", check=0)
    assert payloads(_read_lines(proc, 2)) == ["live1", "live2"]
    lurcher("message", "send", "orders", "eu", "-p", "0", "live3", check=0)
    got = _read_lines(proc, 1)
    assert payloads(got) == ["live3"] and got[0]["offset"] == 3
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(FOLLOW_WAIT_S) == 0
    assert proc.lines.get(timeout=FOLLOW_WAIT_S) is None  # nothing more was printed


def test_follow_stops_on_sigint_and_after_max(lurcher: Cli, topic, spawn) -> None:
    proc = spawn("message", "poll", "orders", "eu", "1", "--follow", "--format", "json",
                 "--interval", "0.05")
    time.sleep(0.5)
    lurcher("message", "send", "orders", "eu", "-p", "1", "x", check=0)
    assert payloads(_read_lines(proc, 1)) == ["x"]
    proc.send_signal(signal.SIGINT)
    assert proc.wait(FOLLOW_WAIT_S) == 0
    lurcher("message", "send", "orders", "eu", "-p", "1", "y", "z", "w", check=0)
    done = lurcher("message", "poll", "orders", "eu", "1", "--first", "--follow", "--max", "3",
                   "--format", "json", "-c", "2", check=0)
    assert payloads(done.json_lines()) == ["x", "y", "z"]


@pytest.mark.parametrize("interval", ["-1", "nan", "0", "inf"])
def test_follow_refuses_an_interval_that_is_not_a_pause(lurcher: Cli, topic,
                                                        interval: str) -> None:
    """--interval took any float: below 0, 0 or nan polled again at once after every empty
    poll (a busy loop on client and server), inf never polled again."""
    lurcher("message", "send", "orders", "eu", "-p", "1", "x", check=0)
    result = lurcher("message", "poll", "orders", "eu", "1", "--first", "--follow", "--max",
                     "1", f"--interval={interval}")
    assert result.code == 2 and result.out == ""
    assert "argument --interval: expected seconds above 0" in result.err


def test_group_poll_and_follow(lurcher: Cli, topic) -> None:
    lurcher("consumer-group", "create", "orders", "eu", "billing", check=0)
    for p in range(3):
        lurcher("message", "send", "orders", "eu", "-p", str(p), f"a{p}", f"b{p}", check=0)
    got = lurcher("message", "poll", "orders", "eu", "--group", "billing", "--follow",
                  "--max", "6", "--format", "json", check=0).json_lines()
    assert sorted(payloads(got)) == sorted(f"{x}{p}" for p in range(3) for x in "ab")
    members = lurcher("--json", "consumer-group", "get", "orders", "eu", "billing", check=0)
    assert members.json()["header"]["members_count"] == 0  # left the group on exit


@pytest.mark.parametrize("raw", [False, True])
def test_send_of_an_endless_input_is_refused_in_bounded_memory(
        server, topic, config_file: Path, raw: bool) -> None:
    """`message send` read its whole input before sending: --input-file /dev/zero (or an
    endless pipe) grew without bound (under a 1 GiB cap: MemoryError and a traceback). Now
    a line, or a --raw input, over the largest message is refused as soon as it is."""
    r = run_capped(["--connection", root_connection(server), "message", "send", "orders",
                    "eu", "-p", "0", "--input-file", "/dev/zero", *(["--raw"] if raw else [])],
                   config_file)
    assert r.code == ExitCode.INPUT and len(r.err.splitlines()) == 1, r.err
    assert "over the largest message (64000000 bytes)" in r.err


def test_send_counts_what_it_sent_before_a_line_that_is_refused(lurcher: Cli, topic,
                                                                tmp_path: Path) -> None:
    source = tmp_path / "lines.txt"
    source.write_bytes(b"a\nb\nc\n" + b"x" * 64_000_001 + b"\n")
    r = lurcher("message", "send", "orders", "eu", "-p", "2", "--batch-size", "2",
                "--input-file", str(source))
    assert r.code == ExitCode.INPUT and "(2 message(s) before it were sent)" in r.err
    assert payloads(poll_json(lurcher, "2", "--first", "-c", "10")) == ["a", "b"]
