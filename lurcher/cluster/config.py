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
authenticated yet: their deadline, and how many may be at once), ``replication_factor``,
the replicas of each partition of a topic created without one (Iggy 0.8 has no such key: it
stores 1), at most the number of nodes. ``[cluster.tls]``
(Iggy 0.8 has none): ``enabled``, ``cert_file``, ``key_file``, ``ca_file``: node links run
over mutual TLS, each node's certificate chaining to ``ca_file`` (relative paths under
``system.path``); the secret handshake still runs inside.

Nodes are numbered by their names in sorted order, so every node derives the same index for
each member from the same list of names. ``decode_cluster`` refuses unknown keys, missing
required keys, duplicate names, a missing secret, TLS enabled without its three files and,
when enabled, any value out of its range (``_RANGES``, ports, the name's length, a heartbeat
not below the view timeout) with one line naming the problem.
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
    _check_values(config)
    _check_ports(config.node)
    if len(names) > MAX_NODES:
        raise ClusterConfigError(f"[cluster]: at most {MAX_NODES} nodes, got {len(names)}")
    if len(set(names)) != len(names):
        raise ClusterConfigError(f"[cluster]: node names must differ, got {names}")
    for other in config.node.others:
        if other.ports.replication is None:
            raise ClusterConfigError(f"cluster.node.others {other.name!r}: no ports.replication")
    return config


_RANGES = {
    "tick_ms": (1, 60_000), "heartbeat_ticks": (1, 1_000_000),
    "view_timeout_ticks": (1, 1_000_000), "view_change_timeout_ticks": (1, 1_000_000),
    "retransmit_ticks": (1, 1_000_000), "commit_timeout_ms": (1, 86_400_000),
    "rebalance_after_ticks": (0, 1_000_000), "checkpoint_every_ops": (0, 1 << 32),
    "replication_factor": (1, 255), "handshake_timeout_ms": (1, 3_600_000),
    "max_handshaking_links": (1, 65_536),
}
"""The bounds (inclusive) of each integer key, checked when the cluster is enabled: below
them a tick loop spins or divides by zero, a timeout fires at once; above, a sleep overflows."""
PORTS = (1, 65_535)


def _within(key: str, value: int, bounds: tuple[int, int]) -> None:
    least, most = bounds
    if not least <= value <= most:
        raise ClusterConfigError(f"{key} must be {least}..{most}, got {value}")


def _check_values(config: ClusterConfig) -> None:
    for key, bounds in _RANGES.items():
        _within(f"cluster.{key}", getattr(config, key), bounds)
    if config.heartbeat_ticks >= config.view_timeout_ticks:  # backups would never hear one
        raise ClusterConfigError(
            f"cluster.heartbeat_ticks ({config.heartbeat_ticks}) must be below "
            f"cluster.view_timeout_ticks ({config.view_timeout_ticks})")
    name_bytes = len(config.name.encode())
    if not 0 < name_bytes < 256:  # it travels in every link's hello (u8 length)
        raise ClusterConfigError(f"cluster.name must be 1..255 bytes of UTF-8, got {name_bytes}")


def _check_ports(nodes: Nodes) -> None:
    _within("cluster.node.current.replication_port", nodes.current.replication_port, PORTS)
    for other in nodes.others:
        for key in Ports.__struct_fields__:
            port = getattr(other.ports, key)
            if port is not None:
                _within(f"cluster.node.others {other.name!r}: ports.{key}", port, PORTS)


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
