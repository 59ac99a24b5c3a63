"""The ``[cluster]`` section, typed: Iggy 0.8's keys with their meaning, plus replication's.

Iggy's keys: ``enabled``, ``name``, ``[cluster.node.current]`` (``name``, ``ip``) and
``[[cluster.node.others]]`` (``name``, ``ip``, optional ``ports`` with ``tcp``, ``quic``,
``http``, ``websocket``). lurcher adds what replication needs: ``secret`` (shared by every
node; a peer that cannot prove it is refused), ``replication_port`` on the current node and
in each other node's ``ports`` (where nodes talk to each other), and the timing of the
replication core (``tick``, view timeouts in ticks; ``rebalance_after_ticks``: how long a
node must have been caught up in a group whose view-0 primary it is before it starts a view
change that makes it primary again, 0 never), ``commit_timeout_ms``, after which
a change or send the group could not commit (no quorum) fails instead of waiting, and
``checkpoint_every_ops`` (every group, metadata and partitions, checkpoints every so many ops
and keeps as many below the checkpoint), ``handshake_timeout_ms`` and
``max_handshaking_links`` (the bounds on connections to the replication port that have not
authenticated yet: their deadline, and how many may be at once), ``replication_factor``, the replicas of each partition of a topic created without one
(Iggy 0.8 has no such key: it stores 1), at most the number of nodes. ``[cluster.tls]``
(Iggy 0.8 has none): ``enabled``, ``cert_file``, ``key_file``, ``ca_file``: node links run
over mutual TLS, each node's certificate chaining to ``ca_file`` (relative paths under
``system.path``); the secret handshake still runs inside.

Nodes are numbered by their names in sorted order, so every node derives the same index for
each member from the same list of names. ``decode_cluster`` refuses unknown keys, missing
required keys, duplicate names, a missing secret and TLS enabled without its three files
with one line naming the problem.
"""

from __future__ import annotations

from typing import Any

import msgspec

from lurcher.cluster.partition_groups import MAX_NODES


class ClusterConfigError(ValueError):
    """The ``[cluster]`` section is unusable; the message is one line for the operator."""


class Ports(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    tcp: int | None = None
    quic: int | None = None
    http: int | None = None
    websocket: int | None = None
    replication: int | None = None


class CurrentNode(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    name: str
    ip: str
    replication_port: int


class OtherNode(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    name: str
    ip: str
    ports: Ports = Ports()


class Nodes(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    current: CurrentNode
    others: list[OtherNode] = []


class ClusterTls(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    enabled: bool = False
    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""  # the CA every node's certificate must chain to


class ClusterConfig(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    enabled: bool = False
    name: str = "lurcher-cluster"
    secret: str = ""
    tick_ms: int = 10
    heartbeat_ticks: int = 10
    view_timeout_ticks: int = 100
    view_change_timeout_ticks: int = 150
    retransmit_ticks: int = 20
    commit_timeout_ms: int = 5000  # a change or send not committed by then fails
    rebalance_after_ticks: int = 200  # a caught-up preferred primary takes its group back
    checkpoint_every_ops: int = 64  # every group's checkpoint interval, 0: none
    replication_factor: int = 3  # replicas of a partition of a topic created without one
    handshake_timeout_ms: int = 5000  # an accepted link not authenticated by then is dropped
    max_handshaking_links: int = 64  # accepted links not yet authenticated; more are dropped
    node: Nodes | None = None
    tls: ClusterTls = ClusterTls()

    @property
    def names(self) -> list[str]:
        assert self.node is not None
        return sorted([self.node.current.name, *(o.name for o in self.node.others)])

    @property
    def index(self) -> int:
        assert self.node is not None
        return self.names.index(self.node.current.name)

    def peer_address(self, index: int) -> tuple[str, int]:
        """Where node ``index`` (another node) listens for replication."""
        assert self.node is not None
        other = next(o for o in self.node.others if o.name == self.names[index])
        assert other.ports.replication is not None  # checked by decode_cluster
        return other.ip, other.ports.replication


def decode_cluster(table: dict[str, Any]) -> ClusterConfig:
    """The typed section from the parsed TOML table. Raises ClusterConfigError."""
    try:
        config = msgspec.convert(table, ClusterConfig)
    except msgspec.ValidationError as e:
        raise ClusterConfigError(f"[cluster]: {e}") from None
    if not config.enabled:
        return config
    if config.node is None:
        raise ClusterConfigError("[cluster] enabled without [cluster.node.current]")
    if not config.secret:
        raise ClusterConfigError("[cluster] enabled without a secret: set cluster.secret")
    names = [config.node.current.name, *(o.name for o in config.node.others)]
    _check_tls(config.tls)
    _check_minimums(config)
    if config.checkpoint_every_ops < 0:
        raise ClusterConfigError("cluster.checkpoint_every_ops must be >= 0")
    if config.rebalance_after_ticks < 0:
        raise ClusterConfigError("cluster.rebalance_after_ticks must be >= 0")
    if not 1 <= config.replication_factor <= 255:
        raise ClusterConfigError(f"cluster.replication_factor must be 1..255, got "
                                 f"{config.replication_factor}")
    if len(names) > MAX_NODES:
        raise ClusterConfigError(f"[cluster]: at most {MAX_NODES} nodes, got {len(names)}")
    if len(set(names)) != len(names):
        raise ClusterConfigError(f"[cluster]: node names must differ, got {names}")
    for other in config.node.others:
        if other.ports.replication is None:
            raise ClusterConfigError(f"cluster.node.others {other.name!r}: no ports.replication")
    return config


_MINIMUMS = {"handshake_timeout_ms": 1, "max_handshaking_links": 1}
"""The least value of each integer key with a lower bound (checked when enabled)."""


def _check_minimums(config: ClusterConfig) -> None:
    for key, least in _MINIMUMS.items():
        value = getattr(config, key)
        if value < least:
            raise ClusterConfigError(f"cluster.{key} must be >= {least}, got {value}")


def _check_tls(tls: ClusterTls) -> None:
    missing = [f"cluster.tls.{key}" for key in ("cert_file", "key_file", "ca_file")
               if tls.enabled and not getattr(tls, key)]
    if missing:
        raise ClusterConfigError(f"[cluster.tls] enabled without {', '.join(missing)}")


def node_toml(me: int, tcp: list[int], replication: list[int], secret: str,
              name: str = "lurcher-cluster", data_dir: str | None = None,
              extra: str = "") -> str:
    """A configuration file (TOML) for node ``me`` of a cluster on one host (127.0.0.1):
    node ``i`` is named ``node-i`` and listens for clients on ``tcp[i]`` and for its peers on
    ``replication[i]``; ``extra`` holds more keys of the ``[cluster]`` table. Used by the
    benchmark's cluster target and by the tests."""
    system = f'[system]\npath = "{data_dir}"\n\n' if data_dir is not None else ""
    others = "".join(
        f'\n[[cluster.node.others]]\nname = "node-{i}"\nip = "127.0.0.1"\n'
        f'ports = {{ tcp = {tcp[i]}, replication = {replication[i]} }}\n'
        for i in range(len(tcp)) if i != me)
    return (f'{system}[tcp]\naddress = "127.0.0.1:{tcp[me]}"\n\n'
            f'[cluster]\nenabled = true\nname = "{name}"\nsecret = "{secret}"\n{extra}\n'
            f'[cluster.node.current]\nname = "node-{me}"\nip = "127.0.0.1"\n'
            f'replication_port = {replication[me]}\n{others}')
