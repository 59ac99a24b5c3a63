"""Node links over mutual TLS (``[cluster.tls]``), on real ``lurcher-server`` processes.

Three nodes with certificates of one CA replicate metadata and partitions as over plain TCP
(a stream created on one node is on every node, a send and a poll through a follower
work), and their replication port speaks TLS with a certificate of that CA. A node without
TLS, or with a certificate of another CA, cannot join: the TLS nodes refuse its links and
log why, and go on serving; an accepting node refuses a dialer's certificate of another CA
itself. A node with ``[cluster.tls]`` enabled but a file unset, or unreadable, does not
start: one line, no traceback.
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import ssl
import time
from pathlib import Path

import pytest

from lurcher.cluster.config import ClusterTls
from lurcher.cluster.links import Links
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.responses.cluster import NodeStatus
from lurcher.transports import tls
from tests.support.cluster import (eventually, leader_of, node_toml, observer,
                                   running_cluster)
from tests.support.server import free_ports, run_server_to_exit


def node_tls(root: Path, count: int, ca_name: str = "cluster CA") -> list[ClusterTls]:
    """A CA and ``count`` node certificates it signed, written under ``root``; per node its
    ``[cluster.tls]``."""
    ca = tls.make_ca(ca_name)
    ca_file = root / "ca.pem"
    ca_file.parent.mkdir(parents=True, exist_ok=True)
    ca_file.write_bytes(tls.cert_pem(ca[0]))
    sections = []
    for i in range(count):
        paths = tls.CertPaths(root / f"node-{i}.crt", root / f"node-{i}.key")
        tls.write_pair(paths, *tls.make_server_cert(issuer=ca, client_auth=True))
        sections.append(ClusterTls(True, str(paths.cert_file), str(paths.key_file),
                                   str(ca_file)))
    return sections


def tls_line(section: ClusterTls) -> str:
    """``section`` as a line of the ``[cluster]`` table."""
    return (f'tls = {{ enabled = true, cert_file = "{section.cert_file}", '
            f'key_file = "{section.key_file}", ca_file = "{section.ca_file}" }}\n')


def node_certificates(root: Path, count: int, ca_name: str = "cluster CA") -> list[str]:
    return [tls_line(section) for section in node_tls(root, count, ca_name)]


def peer_certificate(root: Path, section: ClusterTls) -> dict:
    """The certificate node 0's replication port presents to a dialer with ``section``."""
    port = int(re.search(r"replication_port = (\d+)", (root / "node-0.toml").read_text())[1])
    _, dialing = tls.mutual_contexts(section, root)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with dialing.wrap_socket(raw) as tls_sock:
            return tls_sock.getpeercert()


async def knows_stream(server, name: str) -> bool:
    client = await observer(server)
    try:
        return await client.get_stream(name) is not None
    except IggyError:  # not there yet
        return False
    finally:
        await client.close()


async def test_a_tls_cluster_replicates_metadata_and_serves_through_a_follower(
        tmp_path: Path) -> None:
    sections = node_tls(tmp_path / "certs", 4)  # the fourth: a client of the port
    with running_cluster(tmp_path, 3, [tls_line(s) for s in sections[:3]]) as servers:
        leader = await leader_of(servers)
        follower = next(s for s in servers if s is not leader)
        client = await observer(servers[0])
        await client.create_stream("secure")
        await client.create_topic("secure", "t", 1, replication_factor=3)
        await client.close()
        for server in servers:
            await eventually(lambda s=server: knows_stream(s, "secure"),
                             f"the stream on {server.tcp_address}")
        through = await observer(follower)
        try:
            await through.send_messages("secure", "t", [b"m0", b"m1"], 0)
            polled = await through.poll_messages("secure", "t", 0, "first", 10)
            assert [m.payload for m in polled.messages()] == [b"m0", b"m1"]
        finally:
            await through.close()
        log = "".join(s.output_path.read_text() for s in servers)
        assert "TLS handshake failed" not in log
        presented = peer_certificate(tmp_path, sections[3])  # verified against the CA
        assert presented["subject"] == ((("commonName", "localhost"),),)


async def healthy_peers(server) -> set[str]:
    client = await observer(server)
    try:
        meta = await client.get_cluster_metadata()
    finally:
        await client.close()
    return {n.name for n in meta.nodes if n.status == NodeStatus.HEALTHY}


@pytest.mark.parametrize("intruder", ["plain", "other-ca"])
async def test_a_node_without_tls_or_with_another_ca_cannot_join(
        tmp_path: Path, intruder: str) -> None:
    extras = node_certificates(tmp_path / "certs", 3)
    extras[2] = "" if intruder == "plain" else node_certificates(
        tmp_path / "other", 3, "another CA")[2]
    with running_cluster(tmp_path, 3, extras) as [first, second, outsider]:
        client = await observer(first)
        await client.create_stream("members-only")  # committed by nodes 0 and 1
        await client.close()
        assert await knows_stream(second, "members-only")

        def refused_on(server):
            async def check() -> bool:
                return "cluster link refused: TLS handshake failed" in \
                    server.output_path.read_text()
            return check
        for server in (first, second):
            await eventually(refused_on(server), f"the refusal logged on {server.tcp_address}")
        assert not await knows_stream(outsider, "members-only")
        assert "node-2" not in await healthy_peers(first)
        assert "Traceback" not in first.output_path.read_text()
        assert await knows_stream(first, "members-only")  # still serving


def refusal(tmp_path: Path, extra: str, exit_code: int) -> str:
    """The one line of a node refused at start with ``extra`` in its ``[cluster]``: a bad
    configuration is refused alone (exit 2), a start that fails later (exit 1) logs it as
    its one error after the info lines of the start."""
    config = tmp_path / "node.toml"
    config.write_text(node_toml(0, free_ports(2), free_ports(2), extra))
    result = run_server_to_exit(["--config", str(config)],
                                {"LURCHER_SYSTEM_PATH": str(tmp_path / "data")}, cwd=tmp_path)
    assert result.returncode == exit_code, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if " ERROR " in line] if exit_code == 1 else lines
    assert len(errors) == 1, result.stderr
    return errors[0]


def test_a_half_configured_cluster_tls_is_refused_in_one_line(tmp_path: Path) -> None:
    line = refusal(tmp_path, 'tls = { enabled = true, cert_file = "n.crt", key_file = "n.key" }\n',
                   exit_code=2)
    assert "[cluster.tls] enabled without cluster.tls.ca_file" in line


def test_unreadable_cluster_tls_files_are_refused_in_one_line(tmp_path: Path) -> None:
    [extra] = node_certificates(tmp_path / "certs", 1)
    missing_ca = extra.replace(str(tmp_path / "certs" / "ca.pem"), str(tmp_path / "no-ca.pem"))
    assert "cannot start: cannot load CA" in refusal(tmp_path, missing_ca, exit_code=1)
    garbage = tmp_path / "garbage.crt"
    garbage.write_text("not a certificate\n")
    unreadable = extra.replace(str(tmp_path / "certs" / "node-0.crt"), str(garbage))
    assert f"cannot start: cannot load {garbage}" in refusal(tmp_path, unreadable, exit_code=1)


async def test_an_accepting_node_refuses_a_dialer_certificate_of_another_ca(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Mutual: the dialer trusts the node's CA, but its own certificate is of another one."""
    caplog.set_level(logging.WARNING, logger="lurcher.cluster.links")
    [member] = node_tls(tmp_path / "ours", 1)
    [foreign] = node_tls(tmp_path / "other", 1, "another CA")
    intruder_tls = ClusterTls(True, foreign.cert_file, foreign.key_file, member.ca_file)
    delivered: list = []
    node = Links("c", b"s", 0, {}, lambda *m: delivered.append(m), 1 << 20,
                 tls.mutual_contexts(member, tmp_path))
    await node.start("127.0.0.1", 0)
    intruder = Links("c", b"s", 1, {0: ("127.0.0.1", node.port)},
                     lambda *m: delivered.append(m), 1 << 20,
                     tls.mutual_contexts(intruder_tls, tmp_path))
    await intruder.start("127.0.0.1", 0)
    try:
        for _ in range(500):  # bounded: 10 s
            if "refused: TLS handshake failed: [SSL: CERTIFICATE_VERIFY_FAILED]" in caplog.text:
                break
            await asyncio.sleep(0.02)
        assert "cluster link refused: TLS handshake failed: [SSL: CERTIFICATE_VERIFY_FAILED]" \
            in caplog.text
        assert intruder.outgoing == {} and delivered == []
    finally:
        await intruder.close()
        await node.close()


def tls_then_silence(port: int, dialing, tls_after_s: float) -> float:
    """Connect, start TLS only after ``tls_after_s``, then send nothing: the seconds from the
    connect until the node closed the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        connected = time.monotonic()
        time.sleep(tls_after_s)
        with dialing.wrap_socket(raw) as tls_sock:
            try:
                while tls_sock.recv(65536):  # the node's hello, then its close
                    pass
            except (ssl.SSLError, ConnectionResetError):
                pass
        return time.monotonic() - connected


async def test_the_tls_and_link_handshakes_share_one_deadline(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A peer that spends most of ``handshake_timeout_ms`` in the TLS handshake (it has a
    certificate of the cluster's CA) does not get the whole time again for the link's own
    handshake: the node drops it once the time since the accept is up."""
    caplog.set_level(logging.WARNING, logger="lurcher.cluster.links")
    [member] = node_tls(tmp_path, 1)
    accepting, dialing = tls.mutual_contexts(member, tmp_path)
    timeout_s, tls_after_s = 2.0, 1.5
    node = Links("c", b"s", 0, {}, lambda *m: None, 1 << 20, (accepting, dialing),
                 handshake_timeout_s=timeout_s)
    await node.start("127.0.0.1", 0)
    try:
        held = await asyncio.to_thread(tls_then_silence, node.port, dialing, tls_after_s)
    finally:
        await node.close()
    assert "no handshake within 2s" in caplog.text
    # the deadline, counted from the accept; from the TLS handshake's end it is 3.5 s
    assert timeout_s - 0.1 < held < timeout_s + tls_after_s - 0.5, held
