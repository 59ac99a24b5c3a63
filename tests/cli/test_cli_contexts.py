"""Saved contexts and login/logout with the real ``lurcher`` command: the file location
(LURCHER_CLI_CONFIG / XDG_CONFIG_HOME), mode 0600, create/use/list/show/delete, option
precedence, and a personal access token kept in the context by ``login``."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

from lurcher.sdk.cli.contexts import Context, ContextStore
from lurcher.sdk.cli.exitcodes import CliError, ExitCode
from lurcher.sdk.cli.main import main
from lurcher.sdk.cli.options import ENV
from tests.cli.conftest import Cli, root_connection, run_capped
from tests.support.server import LurcherServer


def test_create_use_list_delete(cli: Cli, server: LurcherServer, config_file: Path) -> None:
    conn = root_connection(server)
    out = cli("context", "create", "local", "--connection", conn, check=0).out
    assert "lurcher context use local" in out
    assert stat.S_IMODE(config_file.stat().st_mode) == 0o600
    assert cli("stream", "list").code in (ExitCode.CONNECTION, ExitCode.AUTHENTICATION)  # not active
    cli("context", "use", "local", check=0)
    cli("stream", "create", "via-context", check=0)
    assert "via-context" in cli("stream", "list", check=0).out
    cli("context", "create", "other", "--address", "127.0.0.1:1", check=0)
    listing = cli("context", "list", check=0)
    assert listing.lines()[0].split() == ["ACTIVE", "NAME", "TRANSPORT", "ADDRESS", "USER", "AUTH"]
    assert "iggy" not in listing.out.replace("iggy  password", "")  # no secrets printed
    rows = cli("--json", "context", "list", check=0).json()
    assert [(r["name"], r["active"], r["address"]) for r in rows] == [
        ("local", True, server.tcp_address), ("other", False, "127.0.0.1:1")]
    assert cli("context", "create", "local", "--address", "x:1").code == ExitCode.CONFIG
    # --context and the address flag override the active context
    assert cli("--context", "other", "ping").code == ExitCode.CONNECTION
    assert cli("ping", "--context", "other").code == ExitCode.CONNECTION
    cli("--context", "other", "-u", "iggy", "-p", "iggy", "--address", server.tcp_address,
        "ping", check=0)
    cli("context", "delete", "local", check=0)
    assert json.loads(config_file.read_text()).get("active") is None
    assert cli("context", "use", "local").code == ExitCode.CONFIG


def test_xdg_config_home_location(cli: Cli, server: LurcherServer, tmp_path: Path) -> None:
    xdg = tmp_path / "xdg"
    env = {"XDG_CONFIG_HOME": str(xdg), "LURCHER_CLI_CONFIG": ""}
    cli("context", "create", "x", "--address", server.tcp_address, "-u", "iggy", "-p", "iggy",
        "--use", env=env, check=0)
    path = xdg / "lurcher" / "contexts.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert cli("ping", env=env, check=0).out.startswith(f"ping {server.tcp_address}")
    assert "x" in cli("context", "show", env=env, check=0).out


def test_login_stores_token_and_logout_removes_it(cli: Cli, server: LurcherServer,
                                                   config_file: Path) -> None:
    out = cli("--address", server.tcp_address, "-u", "iggy", "-p", "iggy", "login", "1day",
              check=0).out
    assert "stored in context 'default'" in out
    saved = json.loads(config_file.read_text())
    ctx = saved["contexts"]["default"]
    assert saved["active"] == "default" and ctx["token"] and "password" not in ctx
    cli("stream", "create", "with-token", check=0)  # no credentials typed
    assert ctx["token_name"] in cli("pat", "list", check=0).out
    assert "token" in cli("context", "list", check=0).out
    assert ctx["token"] not in cli("context", "list", check=0).out
    cli("logout", check=0)
    assert "token" not in json.loads(config_file.read_text())["contexts"]["default"]
    assert cli("stream", "list").code == ExitCode.AUTHENTICATION
    assert cli("logout").code == ExitCode.AUTHENTICATION
    # the token is gone on the server too
    listing = cli("--address", server.tcp_address, "-u", "iggy", "-p", "iggy", "pat", "list",
                  check=0).out
    assert ctx["token_name"] not in listing


def test_env_credentials(cli: Cli, server: LurcherServer) -> None:
    env = {"LURCHER_USERNAME": "iggy", "LURCHER_PASSWORD": "iggy"}
    cli("--address", server.tcp_address, "stream", "create", "env", env=env, check=0)
    env = {"LURCHER_CONNECTION": root_connection(server)}
    assert "env" in cli("stream", "list", env=env, check=0).out


def test_lurcher_connection_outranks_the_active_context_as_connection_does(
        cli: Cli, server: LurcherServer) -> None:
    """LURCHER_CONNECTION gave way to the active context's address, transport and TLS
    (only --connection outranked them), so with a context active the command went to the
    context's server, not the one the variable names."""
    cli("context", "create", "elsewhere", "--address", "127.0.0.1:1", "--use", check=0)
    env = {"LURCHER_CONNECTION": root_connection(server)}
    assert cli("ping", env=env, check=0).out.startswith(f"ping {server.tcp_address}:")
    assert cli("ping").code == ExitCode.CONNECTION  # the context itself still applies


def test_a_failed_save_leaves_no_temp_file(cli: Cli, config_file: Path, monkeypatch) -> None:
    """Saving wrote a temp file next to the contexts file and left it there when encoding
    (a name given as bytes that are not UTF-8) or the rename failed: one more
    '.contexts-*' file, possibly holding credentials, per failed command."""
    cli("context", "create", "one", "--address", "127.0.0.1:1", check=0)
    saved = config_file.read_bytes()
    result = cli("context", "create", "\udcff", "--address", "127.0.0.1:1")
    assert result.code == ExitCode.USAGE and len(result.err.splitlines()) == 1
    store = ContextStore(config_file)
    store.put("two", Context(address="127.0.0.1:2", password="secret"))

    def refused(*args: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("os.replace", refused)
    with pytest.raises(CliError) as err:
        store.save()
    assert err.value.exit_code == ExitCode.CONFIG
    assert sorted(p.name for p in config_file.parent.iterdir()) == [config_file.name]
    assert config_file.read_bytes() == saved


def test_a_login_whose_context_cannot_be_saved_keeps_the_old_token(
        cli: Cli, server: LurcherServer, config_file: Path, monkeypatch) -> None:
    """login deleted the context's old token on the server before saving the new one: a
    save that failed left the context holding a deleted token (logged out) and the new one
    on the server, kept nowhere. Now the old token stays and the new one is deleted."""
    creds = ("--address", server.tcp_address, "-u", "iggy", "-p", "iggy")
    cli(*creds, "login", "--name", "first", check=0)

    def refused(self: ContextStore) -> None:
        raise CliError(f"cannot write {self.path}: Permission denied", ExitCode.CONFIG)

    for name in ENV.values():  # main runs in this process: only the config file counts
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LURCHER_CLI_CONFIG", str(config_file))
    monkeypatch.setattr(ContextStore, "save", refused)
    assert main([*creds, "-q", "login", "--name", "second"]) == ExitCode.CONFIG
    monkeypatch.undo()
    tokens = cli(*creds, "--json", "pat", "list", check=0).json()
    assert [t["name"] for t in tokens] == ["first"]
    cli("stream", "list", check=0)  # the saved context still logs in with its token


def test_a_context_with_an_address_that_is_not_host_port_is_refused(
        cli: Cli, config_file: Path) -> None:
    """--address took any text: 'context create c --address nope' saved a context every
    later command failed with, and the bad address surfaced only when used."""
    for bad in ("nope", "127.0.0.1:99999", ":8090"):
        result = cli("context", "create", "c", "--address", bad)
        assert result.code == ExitCode.USAGE and "argument -a/--address: invalid address" in (
            result.err)
    assert not config_file.exists()
    cli("context", "create", "c", "--address", "[::1]:8090", check=0)


def test_two_logins_in_the_same_second_get_tokens_of_their_own(
        cli: Cli, server: LurcherServer, tmp_path: Path, monkeypatch) -> None:
    """The default token name was ``lurcher-cli-<unix time>``: a second login in the same
    second (two terminals, two scripts) failed with PersonalAccessTokenAlreadyExists."""
    from lurcher.sdk.cli.commands import context as context_command
    creds = ("--address", server.tcp_address, "-u", "iggy", "-p", "iggy", "-q")
    for name in ENV.values():  # main runs in this process: only the config file counts
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(context_command, "time", SimpleNamespace(time=lambda: 1_800_000_000.5))
    for index in (1, 2):
        monkeypatch.setenv("LURCHER_CLI_CONFIG", str(tmp_path / f"login{index}.json"))
        assert main([*creds, "login"]) == ExitCode.OK
    monkeypatch.undo()
    names = [json.loads((tmp_path / f"login{index}.json").read_text())
             ["contexts"]["default"]["token_name"] for index in (1, 2)]
    assert names[0] != names[1] and all(n.startswith("lurcher-cli-1800000000-") for n in names)
    tokens = cli(*creds, "--json", "pat", "list", check=0).json()
    assert sorted(t["name"] for t in tokens) == sorted(names)


def test_a_contexts_file_or_permissions_file_that_never_ends_is_refused(
        lurcher: Cli, server: LurcherServer, config_file: Path) -> None:
    """The contexts file (LURCHER_CLI_CONFIG) and `--file` of permissions were read whole:
    /dev/zero there grew the CLI until the machine's memory ran out (under a 1 GiB cap:
    MemoryError and a traceback). Now more than 16 MiB is refused with one line."""
    r = run_capped(["context", "list"], config_file, {"LURCHER_CLI_CONFIG": "/dev/zero"})
    assert r.code == ExitCode.CONFIG, r.err
    assert r.err == "error: cannot read /dev/zero: more than 16777216 bytes\n"
    lurcher("user", "create", "perms-user", "secret1", check=0)
    r = run_capped(["--connection", root_connection(server), "permissions", "set",
                    "perms-user", "--file", "/dev/zero"], config_file)
    assert r.code == ExitCode.INPUT, r.err
    assert r.err == "error: cannot read /dev/zero: more than 16777216 bytes\n"


def test_logout_forgets_a_token_the_server_no_longer_has(cli: Cli, server: LurcherServer,
                                                         config_file: Path) -> None:
    """A context whose token was deleted elsewhere (or expired) could never log out: logout
    logged in with the token first, was refused (InvalidPersonalAccessToken) and kept it.
    An unreachable server still leaves the token in place."""
    creds = ("--address", server.tcp_address, "-u", "iggy", "-p", "iggy")
    cli(*creds, "login", "--name", "deleted-elsewhere", check=0)
    cli(*creds, "pat", "delete", "deleted-elsewhere", check=0)
    out = cli("logout", check=0).out
    assert "token removed from context 'default' (it was no longer valid" in out
    assert "token" not in json.loads(config_file.read_text())["contexts"]["default"]
    cli(*creds, "login", "--name", "kept-while-down", check=0)
    assert cli("--address", "127.0.0.1:1", "logout").code == ExitCode.CONNECTION
    assert json.loads(config_file.read_text())["contexts"]["default"]["token"]


def test_a_context_name_cannot_be_empty(cli: Cli, config_file: Path) -> None:
    """`context create ""` saved a context no --context or LURCHER_CONTEXT could name (an
    empty one means none)."""
    for name in ("", "  "):
        r = cli("context", "create", name, "--address", "127.0.0.1:1")
        assert r.code == ExitCode.USAGE
        assert r.err == "error: a context name cannot be empty or blank\n"
    assert not config_file.exists()
