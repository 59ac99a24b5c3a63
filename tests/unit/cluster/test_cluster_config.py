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
    ({"handshake_timeout_ms": 0}, "cluster.handshake_timeout_ms must be >= 1, got 0"),
    ({"max_handshaking_links": -1}, "cluster.max_handshaking_links must be >= 1, got -1"),
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
