"""The [cluster] section: Iggy's keys, our replication keys, one-line refusals."""

from __future__ import annotations

import pytest

from lurcher.cluster.config import ClusterConfigError, decode_cluster


def table(**cluster: object) -> dict:
    base = {"enabled": True, "name": "c", "secret": "k",
            "node": {"current": {"name": "b", "ip": "127.0.0.1", "replication_port": 9001},
                     "others": [{"name": "a", "ip": "127.0.0.1",
                                 "ports": {"tcp": 8091, "replication": 9000}},
                                {"name": "c", "ip": "127.0.0.1",
                                 "ports": {"replication": 9002}}]}}
    base.update(cluster)
    return base


def test_nodes_are_numbered_by_sorted_name() -> None:
    config = decode_cluster(table())
    assert config.names == ["a", "b", "c"] and config.index == 1
    assert config.peer_address(0) == ("127.0.0.1", 9000)


def test_disabled_needs_nothing_else() -> None:
    assert decode_cluster({"enabled": False}).node is None


def test_tls_is_off_by_default_and_complete_when_on() -> None:
    assert decode_cluster(table()).tls.enabled is False
    files = {"cert_file": "n.crt", "key_file": "n.key", "ca_file": "ca.pem"}
    assert decode_cluster(table(tls={"enabled": True, **files})).tls.ca_file == "ca.pem"


@pytest.mark.parametrize("change, words", [
    ({"secret": ""}, "without a secret"),
    ({"node": None}, "without [cluster.node.current]"),
    ({"replicas": 3}, "unknown field `replicas`"),
    ({"tick_ms": "fast"}, "Expected `int`"),
    ({"handshake_timeout_ms": 0}, "cluster.handshake_timeout_ms must be 1..3600000, got 0"),
    ({"max_handshaking_links": -1}, "cluster.max_handshaking_links must be 1..65536, got -1"),
    ({"tls": {"enabled": True, "cert_file": "n.crt"}},
     "[cluster.tls] enabled without cluster.tls.key_file, cluster.tls.ca_file"),
    ({"tls": {"enabled": True, "cert_file": "n.crt", "key_file": "n.key", "ca_file": ""}},
     "[cluster.tls] enabled without cluster.tls.ca_file"),
    ({"tls": {"enabled": True, "certfile": "n.crt"}}, "unknown field `certfile`"),
])
def test_bad_sections_are_refused_in_one_line(change: dict, words: str) -> None:
    with pytest.raises(ClusterConfigError) as e:
        decode_cluster(table(**change))
    assert words in str(e.value) and "\n" not in str(e.value)


def test_duplicate_names_and_missing_replication_ports_are_refused() -> None:
    t = table()
    t["node"]["others"][1]["name"] = "b"
    with pytest.raises(ClusterConfigError, match="must differ"):
        decode_cluster(t)
    t = table()
    del t["node"]["others"][0]["ports"]["replication"]
    with pytest.raises(ClusterConfigError, match="no ports.replication"):
        decode_cluster(t)


def with_port(port: int, where: str) -> dict:
    t = table()
    if where == "current":
        t["node"]["current"]["replication_port"] = port
    else:
        t["node"]["others"][0]["ports"][where] = port
    return t


@pytest.mark.parametrize("bad, words", [
    (table(tick_ms=0), "cluster.tick_ms must be 1..60000, got 0"),
    (table(tick_ms=-10), "cluster.tick_ms must be 1..60000, got -10"),
    (table(tick_ms=10**12), "cluster.tick_ms must be 1..60000"),
    (table(heartbeat_ticks=0), "cluster.heartbeat_ticks must be 1.."),
    (table(view_timeout_ticks=0), "cluster.view_timeout_ticks must be 1.."),
    (table(view_change_timeout_ticks=-1), "cluster.view_change_timeout_ticks must be 1.."),
    (table(retransmit_ticks=0), "cluster.retransmit_ticks must be 1.."),
    (table(commit_timeout_ms=0), "cluster.commit_timeout_ms must be 1.."),
    (table(checkpoint_every_ops=-1), "cluster.checkpoint_every_ops must be 0.."),
    (table(replication_factor=0), "cluster.replication_factor must be 1..255, got 0"),
    (table(heartbeat_ticks=100, view_timeout_ticks=100),
     "cluster.heartbeat_ticks (100) must be below cluster.view_timeout_ticks (100)"),
    (table(name=""), "cluster.name must be 1..255 bytes of UTF-8, got 0"),
    (table(name="x" * 256), "cluster.name must be 1..255 bytes of UTF-8, got 256"),
    (with_port(70000, "current"), "cluster.node.current.replication_port must be 1..65535"),
    (with_port(0, "replication"), "cluster.node.others 'a': ports.replication must be 1..65535"),
    (with_port(-1, "tcp"), "cluster.node.others 'a': ports.tcp must be 1..65535, got -1"),
])
def test_every_value_is_checked_when_enabled(bad: dict, words: str) -> None:
    with pytest.raises(ClusterConfigError) as e:
        decode_cluster(bad)
    assert words in str(e.value) and "\n" not in str(e.value)
    bad["enabled"] = False
    decode_cluster(bad)  # not checked while the cluster is off
