"""lurcher-bench refuses out-of-range or unparsable options up front: one line on stderr and
exit status 2, before any server is started or reached (``_execute`` is replaced by a
function that fails the test if called)."""

from __future__ import annotations

import pytest

from lurcher.bench import cli
from lurcher.bench.drivers.lurcher import client
from lurcher.bench.options import BenchOptions

NINES = "9" * 400
NO_SERVER = ["--server-address", "127.0.0.1:1", "--no-progress", "--no-charts"]


@pytest.fixture
def refused(monkeypatch, capsys, tmp_path):
    """Runs ``lurcher-bench ARGS``; asserts it exits 2 with one line on stderr and never
    reaches the run; returns that line."""
    def run_nothing(*args, **kwargs):
        raise AssertionError("the options were accepted and the run started")

    monkeypatch.setattr(cli, "_execute", run_nothing)

    def check(*args: str) -> str:
        try:
            status = cli.main([*NO_SERVER, *args, "--output-dir", str(tmp_path)])
        except SystemExit as e:  # argparse's own checks
            status = e.code
        err = capsys.readouterr().err
        assert status == 2, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        return err
    return check


@pytest.mark.parametrize("args", [
    ["pinned-producer", "--producers", "99999999999", "-b", "2", "-P", "1"],
    ["pinned-consumer", "--consumers", "99999999999"],
    ["balanced-producer", "--producers", "2", "--streams", "99999999999"],
    ["balanced-producer", "--partitions", "99999999999"],
    ["pinned-producer", "--message-batches", "99999999999"],
])
def test_actor_stream_and_batch_counts_are_capped(refused, args: list[str]) -> None:
    assert "must be at most" in refused(*args)


def test_a_batch_must_fit_the_default_send_limit(refused) -> None:
    assert "--message-size must be at most 64000000" in refused(
        "pinned-producer", "-m", "100000000000", "-P", "1", "-b", "1")
    assert "SendMessages limit" in refused("pinned-producer", "-m", "1", "-P", "900000")
    assert "SendMessages limit" in refused("pinned-producer", "-m", "1000000", "-P", "100")
    # the largest batches that fit are accepted
    BenchOptions(workload="pinned-producer", message_size=64_000_000,
                 messages_per_batch=1).validate()
    BenchOptions(workload="pinned-producer", message_size=1, messages_per_batch=800_000,
                 producers=1000, streams=1000).validate()


@pytest.mark.parametrize("duration", [f"{NINES}s", NINES, "2d", "86401"])
def test_an_endless_or_too_long_duration_is_refused(refused, duration: str) -> None:
    err = refused("pinned-producer", "--duration", duration)
    assert "--duration" in err and ("too long" in err or "at most 86400" in err)
    assert len(err) < 300


def test_a_too_long_warmup_is_refused(refused) -> None:
    assert "--warmup must be at most" in refused("pinned-producer", "--warmup", "25h")


@pytest.mark.parametrize("args, says", [
    (["--server-pid", "-5"], "--server-pid must be a positive integer"),
    (["--server-pid", "0"], "--server-pid must be a positive integer"),
    (["--server-address", "127.0.0.1:abc"], "must be host:port"),
    (["--server-address", "127.0.0.1:99999"], "above 65535"),
    (["--server-address", "127.0.0.1:0"], "invalid port"),
    (["--server-address", "127.0.0.1:8090,127.0.0.1:x"], "must be host:port"),
    (["--username", "u" * 300], "--username must be at most 255 bytes"),
])
def test_bad_server_options_are_refused(refused, args: list[str], says: str) -> None:
    err = refused("pinned-producer", *args)  # after NO_SERVER's: the later one wins
    assert says in err and "--" in err


@pytest.mark.parametrize("args", [
    ["--connection-option", "heartbeat_interval=abc"],
    ["--connection-option", "nodelay=maybe"],
    ["--transport", "quic", "--connection-option", "initial_mtu=abc"],
])
def test_an_unparsable_connection_option_is_refused(refused, args: list[str]) -> None:
    assert "--connection-option" in refused("pinned-producer", *args)


def test_connection_options_reach_the_client() -> None:
    def config(**options: str):
        o = BenchOptions(workload="pinned-producer", connection_options=options).validate()
        return client("127.0.0.1:1", o).config

    assert config().heartbeat_interval_s is None  # the bench's default: no heartbeat
    assert config(heartbeat_interval="1s").heartbeat_interval_s == 1.0
    assert config(request_timeout="5s", nodelay="false").request_timeout_s == 5.0
    assert config(nodelay="false").nodelay is False
    # a value is taken whole, '&' included (it is not a connection string's query)
    assert config(tls_ca_file="/certs/R&D/ca.pem").tls_ca_file == "/certs/R&D/ca.pem"


def test_an_option_error_no_check_caught_is_still_one_line(monkeypatch, capsys,
                                                           tmp_path) -> None:
    from lurcher.bench import drivers

    def fails(target):  # the run's first step after validation, before any server
        raise OverflowError("int too big to convert")

    monkeypatch.setattr(drivers, "module", fails)
    assert cli.main(["pinned-producer", *NO_SERVER, "--output-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == "lurcher-bench: int too big to convert\n"
