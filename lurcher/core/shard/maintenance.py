"""Periodic maintenance of a shard: the message cleaner, the heartbeat verifier and the
consumer-group revocation timeout (jobs registered with ``core.shard.background``).

Message cleaner (``data_maintenance.messages``: ``cleaner_enabled``, ``interval``), per
topic, as the 0.8 server does:

1. expiry: in every partition, the sealed segments whose newest message is older than the
   topic's ``message_expiry_us`` are deleted;
2. size: while the topic holds at least 90% of ``max_topic_size``, the sealed segment with
   the oldest first message across the topic's partitions is deleted (the run of a
   partition's segments that would go one after another is deleted at once: a step costs
   the same with 20,000 segments as with 2). The topic's size is
   the whole topic's: with several shards each one trims its own partitions, by its share
   of the excess (what the others hold is asked first, ``Cluster.gather``); on a cluster
   node the partitions it holds no replica of count too, as their groups' primaries report
   them (``cluster.peer_stats``; a group that does not answer counts as last seen), so
   with a ``replication_factor`` below the node count the nodes, each trimming the replicas
   it holds by its share, take the excess once between them.

The open segment of a partition is never deleted, nor a segment holding messages past the
lowest offset a consumer or group stored on that partition (the 0.8 barrier: unconsumed
messages are kept). Expiry 0 or U64_MAX means never; max size 0 or U64_MAX means unlimited.

Heartbeat verifier (``heartbeat.enabled``, ``interval``): a session whose last Ping is older
than 1.2 x interval is stale (only Ping refreshes it, as in 0.8): it leaves its consumer
groups and its connection is dropped (aborted: a stale client that does not read would hold a
graceful close open, and the connection with it, forever).

Login deadline (``limits.login_timeout``): a binary connection whose session is not logged
in within the timeout of its accept (its TLS or WebSocket handshake included: the session
opens only after it) or of its last logout is dropped (aborted: a client
that does not read would hold a graceful close open); a check runs four times per timeout
(at most every 5 s), so the drop comes between 1 and 1.25 x the timeout (at most 5 s beyond
it). A login request being checked (``Session.logins_in_flight``: its back-off wait, the
password hash) extends the deadline by ``auth.login_backoff_max`` and ``LOGIN_GRACE_US``,
so a correct login sent in time is not cut. A connection closing counts too: one whose
login the server ended (its user or token removed) or whose frame it refused is closed
once what was written to it is sent, which a client that never reads would hold off
forever, keeping the connection and the replies queued on it. HTTP requests have no
connection here.

Every function takes ``now_us``; none reads a clock.
"""

from __future__ import annotations

import heapq
import logging
from typing import Any

from lurcher.core.log.partition import Partition
from lurcher.core.meta.state import TopicMeta
from lurcher.core.shard.background import register
from lurcher.core.wire.units import U64_MAX
from lurcher.core.wire.validation import clamp_uint

log = logging.getLogger(__name__)

SIZE_THRESHOLD_NUM, SIZE_THRESHOLD_DEN = 9, 10   # trim while size >= 90% of the maximum
HEARTBEAT_GRACE_NUM, HEARTBEAT_GRACE_DEN = 6, 5  # stale after 1.2 x the interval
LOGIN_CHECK_MIN_US, LOGIN_CHECK_MAX_US = 10_000, 5_000_000
LOGIN_GRACE_US = 5_000_000  # a login being checked may also wait for a password hash


def _enabled_interval(enabled: bool, interval_us: int) -> int | None:
    return interval_us if enabled else None


# -- message cleaner ----------------------------------------------------------------------

def never(value: int) -> bool:
    return value in (0, U64_MAX)


def barrier(partition: Partition) -> int | None:
    return partition.min_stored_offset()


def expire_topic(partitions: list[Partition], now_us: int, expiry_us: int) -> tuple[int, int]:
    """Delete every expired sealed segment of the partitions. Returns (segments, messages)."""
    segments = messages = 0
    if never(expiry_us):
        return 0, 0
    for partition in partitions:
        s, m = partition.delete_expired_segments(now_us, expiry_us, barrier(partition))
        segments, messages = segments + s, messages + m
    return segments, messages


_NONE_LEFT = (float("inf"), 0)  # ranks after every segment


def _oldest_deletable(partitions: list[Partition],
                      barriers: list[int | None]) -> tuple[int, tuple] | None:
    """Where in ``partitions`` the partition is whose first segment is deletable (below its
    barrier in ``barriers``) and has the oldest first message (the first such on a tie), and
    the rank (first timestamp, place) of the runner-up's first segment (``_NONE_LEFT`` when
    there is none); None when no segment is deletable."""
    ranked = heapq.nsmallest(2, ((p.segments[0].first_timestamp, i)
                                 for i, p in enumerate(partitions)
                                 if p.deletable_segments(barriers[i]) > 0))
    if not ranked:
        return None
    return ranked[0][1], ranked[1] if len(ranked) > 1 else _NONE_LEFT


def _run_before(partition: Partition, place: int, runner_up: tuple, budget: int,
                barrier_offset: int | None) -> int:
    """How many leading segments of ``partition`` (at ``place``) deleting the oldest one at
    a time would delete one after another: the first, then each one deletable that ranks
    before ``runner_up`` while the bytes of those before it are at most ``budget``."""
    segments, deletable = partition.segments, partition.deletable_segments(barrier_offset)
    n, freed = 1, segments[0].size_bytes
    while n < deletable and freed <= budget and (segments[n].first_timestamp, place) < runner_up:
        freed += segments[n].size_bytes
        n += 1
    return n


def trim_topic(partitions: list[Partition], max_size_bytes: int,
               elsewhere_bytes: int = 0) -> tuple[int, int]:
    """Delete oldest sealed segments while the topic is at >= 90% of ``max_size_bytes``.

    ``partitions`` are the topic's partitions on this shard; ``elsewhere_bytes`` is what its
    partitions on the other shards held when last asked. The topic's excess over the
    threshold is trimmed here in proportion to the part of the topic this shard holds, so
    that the shards, each trimming its own partitions at the same time, take the excess
    once between them (to a segment each), not once each. The consumer barriers are read
    once: nothing stores an offset while the trim runs (on the event loop)."""
    if never(max_size_bytes):
        return 0, 0
    here = sum(p.size_bytes for p in partitions)
    excess = here + elsewhere_bytes - max_size_bytes * SIZE_THRESHOLD_NUM // SIZE_THRESHOLD_DEN
    if excess < 0 or here == 0:
        return 0, 0
    share = excess * here // (here + elsewhere_bytes)
    barriers = [barrier(p) for p in partitions]
    segments = messages = freed = 0
    while freed <= share:
        found = _oldest_deletable(partitions, barriers)
        if found is None:
            break
        place, runner_up = found
        oldest = partitions[place]
        size = oldest.size_bytes
        run = _run_before(oldest, place, runner_up, share - freed, barriers[place])
        s, m = oldest.delete_oldest_segments(run, barriers[place])
        segments, messages, freed = segments + s, messages + m, freed + size - oldest.size_bytes
    return segments, messages


def clean_topic(shard: Any, topic: TopicMeta, now_us: int,
                elsewhere_bytes: int = 0) -> tuple[int, int]:
    """Expiry then size retention for one topic (``elsewhere_bytes``: see ``trim_topic``).
    Returns (segments, messages) deleted."""
    partitions = [p for pid in range(topic.partitions_count)
                  if (p := shard.partitions.get((topic.stream_id, topic.id, pid))) is not None]
    # values stored out of range by an older version mean "never" / "unlimited"
    s1, m1 = expire_topic(partitions, now_us, clamp_uint(topic.message_expiry_us, 64, U64_MAX))
    s2, m2 = trim_topic(partitions, max_topic_size(topic), elsewhere_bytes)
    return s1 + s2, m1 + m2


def max_topic_size(topic: TopicMeta) -> int:
    return clamp_uint(topic.max_topic_size, 64, U64_MAX)


def cleaner_interval_us(shard: Any) -> int | None:
    section = shard.config.typed.data_maintenance.messages
    return _enabled_interval(section.cleaner_enabled, section.interval)


@register("message_cleaner", cleaner_interval_us)
def clean_messages(shard: Any, now_us: int) -> Any:
    """Run retention over every topic of the shard. Returns (segments, messages) deleted,
    or, with several shards or on a cluster node, and a topic of limited size, a coroutine
    that returns them once it has asked what the partitions elsewhere hold (module doc)."""
    limited = [t for t in shard.meta.state.topics() if not never(max_topic_size(t))]
    if not limited or (shard.cluster is None and shard.peer_stats is None):
        return clean_all_topics(shard, now_us, {})

    async def with_sizes_elsewhere() -> tuple[int, int]:
        return clean_all_topics(shard, now_us, await sizes_elsewhere(shard, limited))
    return with_sizes_elsewhere()


async def sizes_elsewhere(shard: Any, topics: list[TopicMeta]) -> dict[tuple[int, int], int]:
    """Bytes per (stream id, topic id) that ``shard`` does not hold: on the node's other
    shards, and on a cluster node in the partitions of ``topics`` it holds no replica of."""
    partitions: dict[tuple[int, int, int], Any] = {}
    if shard.cluster is not None:
        await shard.cluster.gather()
        partitions.update(shard.cluster.remote_partitions)
    if shard.peer_stats is not None:
        await shard.peer_stats.refresh(topics)
        partitions.update(shard.peer_stats.rows())  # a partition reported twice counts once
    return sizes_by_topic(partitions)


def sizes_by_topic(partitions: dict[tuple[int, int, int], Any]) -> dict[tuple[int, int], int]:
    """Bytes held per (stream id, topic id) by ``partitions`` (their counters, by key)."""
    sizes: dict[tuple[int, int], int] = {}
    for (stream_id, topic_id, _), stats in partitions.items():
        sizes[stream_id, topic_id] = sizes.get((stream_id, topic_id), 0) + stats.size_bytes
    return sizes


def clean_all_topics(shard: Any, now_us: int,
                     elsewhere: dict[tuple[int, int], int]) -> tuple[int, int]:
    """Retention over every topic; ``elsewhere``: bytes per topic on the other shards."""
    segments = messages = 0
    for topic in list(shard.meta.state.topics()):
        try:
            s, m = clean_topic(shard, topic, now_us, elsewhere.get((topic.stream_id, topic.id), 0))
        except OSError as exc:  # its segments stay: tried again at the next run
            log.error("cleaning topic %d/%d failed: %s", topic.stream_id, topic.id, exc)
            continue
        if s:
            log.info("retention: deleted %d segment(s), %d message(s) of topic %d/%d",
                     s, m, topic.stream_id, topic.id)
        segments, messages = segments + s, messages + m
    return segments, messages


# -- heartbeat ----------------------------------------------------------------------------

def heartbeat_interval_us(shard: Any) -> int | None:
    section = shard.config.typed.heartbeat
    return _enabled_interval(section.enabled, section.interval)


def stale_sessions(shard: Any, now_us: int, interval_us: int) -> list[Any]:
    limit = now_us - interval_us * HEARTBEAT_GRACE_NUM // HEARTBEAT_GRACE_DEN
    return [s for s in shard.sessions.values() if s.last_seen_us < limit]


@register("heartbeat_verifier", heartbeat_interval_us)
def verify_heartbeats(shard: Any, now_us: int) -> int:
    """Drop the connections of stale sessions (they leave their groups). Returns how many."""
    stale = stale_sessions(shard, now_us, shard.config.typed.heartbeat.interval)
    for session in stale:
        log.warning("stale client %d (%s): no heartbeat since %d µs, disconnecting",
                    session.client_id, session.address, session.last_seen_us)
        connection = shard.connections.get(session.client_id)
        shard.close_session(session)
        if connection is not None:
            connection.abort()
    return len(stale)


# -- login deadline -----------------------------------------------------------------------

def login_check_us(shard: Any) -> int | None:
    """Check four times per ``limits.login_timeout`` (at most every 5 s); None: no deadline."""
    timeout = shard.config.typed.limits.login_timeout
    if never(timeout):
        return None
    return max(LOGIN_CHECK_MIN_US, min(timeout // 4, LOGIN_CHECK_MAX_US))


def late_logins(shard: Any, now_us: int, timeout_us: int) -> list[Any]:
    """Sessions of a connection not logged in within ``timeout_us`` of opening or logout
    (with a login being checked: that plus the longest back-off and ``LOGIN_GRACE_US``)."""
    grace = shard.config.typed.auth.login_backoff_max + LOGIN_GRACE_US
    return [s for s in shard.sessions.values()
            if s.user_id is None and _not_dropped(shard, s.client_id)
            and now_us - s.logged_out_us > timeout_us + (grace if s.logins_in_flight else 0)]


def _not_dropped(shard: Any, client_id: int) -> bool:
    """The connection is there and not already dropped (one closing gracefully counts)."""
    connection = shard.connections.get(client_id)
    return connection is not None and not connection.aborted


@register("login_deadline", login_check_us)
def close_late_logins(shard: Any, now_us: int) -> int:
    """Drop the connections that did not log in in time (at once: one that does not read
    would hold a graceful close open). Returns how many."""
    timeout = shard.config.typed.limits.login_timeout
    late = late_logins(shard, now_us, timeout)
    for session in late:
        log.info("client %d (%s) did not log in within %g s: connection dropped",
                 session.client_id, session.address, timeout / 1e6)
        shard.connections[session.client_id].abort()
    return len(late)


# -- consumer group revocations -----------------------------------------------------------

def revocation_check_us(shard: Any) -> int | None:
    return shard.config.typed.consumer_group.check_interval


@register("revocation_timeout", revocation_check_us)
def expire_revocations(shard: Any, now_us: int) -> int:
    """Complete partition hand-overs pending longer than ``consumer_group.rebalancing_timeout``."""
    def topic_of(stream_id: int, topic_id: int) -> TopicMeta | None:
        stream = shard.meta.state.streams.get(stream_id)
        return stream.topics.get(topic_id) if stream else None
    timeout_us = shard.config.typed.consumer_group.rebalancing_timeout
    return shard.groups.expire_revocations(topic_of, now_us, timeout_us)
