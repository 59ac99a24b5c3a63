"""Failures of the real ``lurcher`` command: each names the problem on stderr and ends with
the exit code of the table in ``lurcher.sdk.cli.exitcodes`` (documented in ``--help``)."""

from __future__ import annotations

import socket
import subprocess

from lurcher.sdk.cli.exitcodes import ExitCode
from tests.cli.conftest import CLI, RUN_TIMEOUT_S, Cli, cli_env
from tests.support.server import LurcherServer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_help_documents_exit_codes(cli: Cli) -> None:
    out = cli("--help", check=0).out
    assert "exit codes:" in out
    for code in ExitCode:
        assert f"{int(code):>3}  " in out


def test_not_found_errors_name_the_resource(lurcher: Cli) -> None:
    r = lurcher("stream", "get", "x")
    assert r.code == ExitCode.NOT_FOUND
    assert r.err.strip() == "error: stream 'x' not found (StreamNameNotFound, 1010)"
    r = lurcher("stream", "delete", "7")
    assert (r.code, r.err.strip()) == (
        ExitCode.NOT_FOUND, "error: stream '7' not found (StreamIdNotFound, 1009)")
    lurcher("stream", "create", "s", check=0)
    r = lurcher("topic", "get", "s", "nope")
    assert r.code == ExitCode.NOT_FOUND and "topic 'nope' not found in stream 's'" in r.err
    r = lurcher("message", "send", "nope", "t", "m")
    assert r.code == ExitCode.NOT_FOUND and "stream 'nope' not found" in r.err
    r = lurcher("user", "get", "ghost")
    assert r.code == ExitCode.NOT_FOUND and "user 'ghost' not found" in r.err
    assert r.out == ""


def test_already_exists(lurcher: Cli) -> None:
    lurcher("stream", "create", "dup", check=0)
    r = lurcher("stream", "create", "dup")
    assert r.code == ExitCode.ALREADY_EXISTS
    assert "stream 'dup' already exists (StreamNameAlreadyExists, 1012)" in r.err


def test_wrong_password_and_no_credentials(cli: Cli, server: LurcherServer) -> None:
    r = cli("--address", server.tcp_address, "-u", "iggy", "-p", "wrong", "stream", "list")
    assert r.code == ExitCode.CREDENTIALS
    assert "invalid credentials for user 'iggy'" in r.err and "(InvalidCredentials, 42)" in r.err
    r = cli("--address", server.tcp_address, "stream", "list")
    assert r.code == ExitCode.AUTHENTICATION and "not logged in" in r.err
    r = cli("--address", server.tcp_address, "--token", "bogus", "stream", "list")
    assert r.code == ExitCode.CREDENTIALS


def test_a_refused_login_has_its_own_exit_code_and_line(cli: Cli, lurcher: Cli,
                                                         server: LurcherServer) -> None:
    """A wrong password, or a username or password the server refuses for its form
    (InvalidUsername 43, InvalidPassword 44), exited 5 like "not logged in"; and a user
    command refused for the form of a new username or password exited 5 too, though the
    login had succeeded. Now a refused login exits 10 (CREDENTIALS) with one line saying
    so, and a malformed new username or password is bad input (8)."""
    login = ("--address", server.tcp_address)
    for user, password, words in (
            ("iggy", "wrong", "wrong username or password"),
            ("ig", "wrong", "'ig' is not a valid username (3 to 50 bytes)"),
            ("iggy", "wr", "the password given for 'iggy' is not a valid password")):
        for command in (("login",), ("stream", "list")):
            r = cli(*login, "-u", user, "-p", password, *command)
            assert r.code == ExitCode.CREDENTIALS, r
            assert words in r.err and len(r.err.splitlines()) == 1, r
    r = lurcher("user", "create", "xy", "secret")
    assert r.code == ExitCode.INPUT and "a username takes 3 to 50 bytes" in r.err
    r = lurcher("user", "create", "bobby", "pw")
    assert r.code == ExitCode.INPUT and "a password takes 3 to 100 bytes" in r.err
    r = lurcher("user", "password", "iggy", "not-the-password", "newpassword")
    assert r.code == ExitCode.CREDENTIALS
    assert "the current password given for user 'iggy' is wrong" in r.err


def test_server_down(cli: Cli) -> None:
    address = f"127.0.0.1:{_free_port()}"
    r = cli("--connection", f"iggy://iggy:iggy@{address}", "ping")
    assert r.code == ExitCode.CONNECTION
    assert f"cannot connect to {address}" in r.err and "(CannotEstablishConnection, 9)" in r.err


def test_server_stopped_after_context_created(cli: Cli, server_factory) -> None:
    srv = server_factory()
    cli("context", "create", "gone", "--connection", f"iggy://iggy:iggy@{srv.tcp_address}",
        "--use", check=0)
    cli("ping", check=0)
    srv.stop()
    r = cli("stream", "list")
    assert r.code == ExitCode.CONNECTION and "cannot connect" in r.err


def test_usage_errors_exit_2(lurcher: Cli) -> None:
    assert lurcher("stream").code == ExitCode.USAGE
    assert lurcher("stream", "frobnicate").code == ExitCode.USAGE
    assert lurcher("message", "poll", "s").code == ExitCode.USAGE
    r = lurcher("message", "poll", "s", "t", "--first", "--last")
    assert r.code == ExitCode.USAGE and "not allowed with" in r.err
    r = lurcher("message", "send", "s", "t", "-H", "k:weird:1", "x")
    assert r.code == ExitCode.USAGE and "invalid header" in r.err
    r = lurcher("topic", "create", "s", "t", "1", "none", "-m", "lots")
    assert r.code == ExitCode.USAGE and "invalid size" in r.err
    r = lurcher("message", "send", "s", "t", "--id", "1", "a", "b")
    assert r.code == ExitCode.USAGE and "1 --id value(s) for 2 message(s)" in r.err
    r = lurcher("user", "create", "bob", "pw", "-g", "fly")
    assert r.code == ExitCode.USAGE and "unknown global permission 'fly'" in r.err


def test_input_and_config_errors(cli: Cli, lurcher: Cli, tmp_path) -> None:
    r = cli("--connection", "http://nope", "ping")
    assert r.code == ExitCode.INPUT and "(InvalidConnectionString, 8000)" in r.err
    r = cli("--context", "missing", "ping")
    assert r.code == ExitCode.CONFIG and "context 'missing' not found" in r.err
    lurcher("stream", "create", "s", check=0)
    lurcher("topic", "create", "s", "t", check=0)
    r = lurcher("message", "send", "s", "t", "--input-file", str(tmp_path / "no-such-file"))
    assert r.code == ExitCode.INPUT and "cannot read" in r.err
    r = lurcher("message", "send", "s", "t", input="\n\n")
    assert r.code == ExitCode.INPUT and "no messages" in r.err
    r = lurcher("permissions", "set", "iggy", "--file", str(tmp_path / "none.json"))
    assert r.code == ExitCode.INPUT


def test_permission_denied(lurcher: Cli, cli: Cli, server: LurcherServer) -> None:
    lurcher("user", "create", "reader", "secret1", "-g", "r_str", check=0)
    conn = f"iggy://reader:secret1@{server.tcp_address}"
    cli("--connection", conn, "stream", "list", check=0)
    r = cli("--connection", conn, "stream", "create", "nope")
    assert r.code == ExitCode.PERMISSION and "permission denied" in r.err


def test_a_non_ascii_digit_is_a_name_not_an_id(lurcher: Cli) -> None:
    """'١' (ARABIC-INDIC DIGIT ONE) passed str.isdigit and was taken as id 1: deleting the
    stream named '١' deleted stream 1 instead (found by an audit)."""
    for name in ("keep0", "keep1", "١"):  # ids 0, 1, 2
        lurcher("stream", "create", name, check=0)
    lurcher("stream", "delete", "١", check=0)
    names = [s["name"] for s in lurcher("--json", "stream", "list", check=0).json()]
    assert sorted(names) == ["keep0", "keep1"]
    for odd in ("²", "9" * 5000, "4294967296"):  # names, as the server takes them
        r = lurcher("stream", "get", odd)
        assert r.code in (ExitCode.NOT_FOUND, ExitCode.USAGE), r
        assert "Traceback" not in r.err and len(r.err.strip().splitlines()) == 1, r.err


def test_out_of_range_and_malformed_values_are_one_line_usage_errors(
        lurcher: Cli, cli: Cli) -> None:
    """Each of these ended in a traceback (struct.error, OverflowError, ValueError,
    UnicodeEncodeError, FileNotFoundError, ssl.SSLError) with exit code 1."""
    lurcher("stream", "create", "s1", check=0)
    lurcher("topic", "create", "s1", "t1", "1", "none", check=0)
    huge, nines = "99999999999", "9" * 400
    for args in (("topic", "create", "s1", "t2", "4294967296"),
                 ("partition", "create", "s1", "t1", "4294967296"),
                 ("message", "poll", "s1", "t1", "0", "-c", huge),
                 ("message", "send", "s1", "t1", "-p", huge, "x"),
                 ("consumer-offset", "set", "1", "s1", "t1", huge, "0"),
                 ("client", "get", huge),
                 ("segment", "delete", "s1", "t1", "0", huge),
                 ("user", "create", "u9", "password9", "-s", f"{huge}:r_str"),
                 ("message", "poll", "s1", "t1", "0", "--offset", "18446744073709551616"),
                 ("message", "poll", "s1", "t1", "0", "--timestamp", "9" * 23),
                 ("topic", "create", "s1", "t3", "1", f"{nines}s"),
                 ("topic", "create", "s1", "t3", "1", "none", "-m", "999999999999999EB"),
                 ("pat", "create", "p1", f"{nines}s"),
                 ("topic", "create", "s1", "t3", "1", "none", "-r", "256"),
                 ("stream", "create", "x" * 300),
                 ("stream", "create", "\udcff\udcfe"),
                 ("--timeout", "-1", "ping"), ("--timeout", "nan", "ping")):
        _assert_usage_error(lurcher(*args), args)
    for address in ("127.0.0.1:abc", "127.0.0.1:99999"):
        _assert_usage_error(cli("-a", address, "ping"), address)


def _assert_usage_error(r, what) -> None:
    """Exit 2, no traceback, the problem on the last line (argparse shows the usage above)."""
    assert r.code == ExitCode.USAGE, (what, r)
    assert "Traceback" not in r.err and "error: " in r.err.strip().splitlines()[-1], (what, r.err)


def test_a_bad_tls_ca_file_is_named(cli: Cli, server: LurcherServer, tmp_path) -> None:
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    for path, says in ((tmp_path / "missing.pem", "No such file"),
                       (not_pem, "holds no usable certificate")):
        r = cli("-a", server.tcp_address, "--tls", "--tls-ca-file", str(path), "ping")
        assert r.code == ExitCode.INPUT, r
        assert says in r.err and str(path) in r.err and "Traceback" not in r.err, r.err


def test_a_command_the_transport_cannot_carry_is_named_with_the_transport(
        cli: Cli, server_factory) -> None:
    """`lurcher me` over HTTP said a bare "error: feature unavailable (FeatureUnavailable,
    5)": neither the command nor the transport that lacks it."""
    server = server_factory({"LURCHER_HTTP_ENABLED": "true",
                             "LURCHER_HTTP_ADDRESS": "127.0.0.1:0"})
    http = ("--transport", "http", "--address", server.endpoints["http"], "-u", "iggy",
            "-p", "iggy")
    r = cli(*http, "me")
    assert r.code == ExitCode.ERROR and len(r.err.splitlines()) == 1
    assert r.err.startswith("error: 'lurcher me' is not available over http (get_me: ")
    assert "use --transport tcp, quic or ws (FeatureUnavailable, 5)" in r.err
    r = cli(*http, "snapshot", "--output-file", "unused.zip")
    assert "'lurcher snapshot' is not available over http" in r.err


def test_an_output_that_cannot_be_written_is_one_line(server: LurcherServer,
                                                      config_file) -> None:
    """Output on a full disk (/dev/full here) ended in an OSError traceback, exit 1, for
    tables, JSON and confirmations alike."""
    base = [*CLI, "--connection", f"iggy://iggy:iggy@{server.tcp_address}"]
    for command in (["stream", "list"], ["--json", "stream", "list"],
                    ["stream", "create", "full-disk"]):
        with open("/dev/full", "w") as full:
            proc = subprocess.run([*base, *command], stdout=full, stderr=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL, env=cli_env(config_file),
                                  timeout=RUN_TIMEOUT_S)
        err = proc.stderr.decode()
        assert proc.returncode == ExitCode.INPUT, err
        assert err == "error: cannot write the output: No space left on device\n"


def test_an_empty_or_overlong_identifier_names_its_argument(lurcher: Cli) -> None:
    """An empty stream, topic, group, consumer or user argument was sent and answered
    "error: invalid format (InvalidFormat, 4)", exit 1, naming nothing; a 300-byte name
    "error: invalid argument: name longer than 255 bytes: 300"."""
    for args, name in ((("stream", "get", ""), "stream"), (("stream", "create", ""), "name"),
                       (("topic", "get", "s", ""), "topic"), (("user", "get", ""), "user"),
                       (("consumer-offset", "get", "", "s", "t", "0"), "consumer"),
                       (("message", "poll", "s", "t", "0", "--consumer", ""), "--consumer"),
                       (("stream", "create", "n" * 300), "name")):
        r = lurcher(*args)
        assert r.code == ExitCode.USAGE and len(r.err.splitlines()) == 1, (args, r)
        assert r.err.startswith(
            f"error: argument {name}: expected an id or a name of 1 to 255 bytes"), r.err


def test_a_connection_option_the_transport_refuses_is_named(cli: Cli,
                                                             server: LurcherServer) -> None:
    """`?response_buffer_size=-5` (or a QUIC / WebSocket size that is not one) said only
    "error: invalid configuration (InvalidConfiguration, 2)", exit 1: not which option.
    The connection string refuses it now, before any connect; so it does a size of 0."""
    for value in ("-5", "0"):
        r = cli("--connection",
                f"iggy://iggy:iggy@{server.tcp_address}?response_buffer_size={value}", "ping")
        assert r.code == ExitCode.INPUT and len(r.err.splitlines()) == 1, r
        assert r.err.startswith("error: invalid connection string: option "
                                "response_buffer_size: "), r.err
        assert repr(value) in r.err or "0 bytes" in r.err, r.err
