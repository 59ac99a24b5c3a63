"""The workload table (Iggy's benchmark kinds) and the actor plan each implies.

A workload says which actors run (producers, consumers, producing consumers), how many
streams and partitions exist, whether consumers form groups, and whether data must be
stored before measuring (consumer-only workloads). ``plan(options)`` turns that into
``ActorSpec``s, one per actor process, plus the ``Layout`` the target must create.

Streams are numbered from 1 (``bench-stream-N``), partitions from 0, one topic ``topic-1``
per stream, one consumer group ``bench-group-N`` per stream when groups are used. Actor i
(1-based) of a kind addresses stream ``1 + (i - 1) % streams``.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from lurcher.bench.options import BenchOptions, BenchOptionsError

TOPIC = "topic-1"
PRODUCER, CONSUMER, PRODUCING_CONSUMER = "producer", "consumer", "producing_consumer"


def stream_name(index: int) -> str:
    return f"bench-stream-{index}"


def group_name(stream_index: int) -> str:
    return f"bench-group-{stream_index}"


class ActorSpec(msgspec.Struct, frozen=True):
    """One actor process: what it does and where.

    ``partition``: a fixed partition id, or None for balanced sends / group polls.
    ``group``: the consumer group stream index (shared finish counter), or None.
    ``target_messages``: messages a plain consumer reads before it stops, or its whole
    group reads for a group member (None: until the duration ends).
    """
    role: str
    actor_id: int
    stream: int
    partitions: int
    partition: int | None
    group: int | None = None
    target_messages: int | None = None


class Layout(msgspec.Struct, frozen=True):
    """What a target must create before the actors start."""
    streams: int
    partitions: int
    groups: bool


class Workload(msgspec.Struct, frozen=True):
    name: str
    alias: str
    about: str
    default_streams: Callable[[BenchOptions], int]
    default_partitions: int
    producers: bool
    consumers: bool
    groups: bool = False
    producing_consumers: bool = False
    seeded: bool = False


def _by_producers(o: BenchOptions) -> int:
    return o.producers


def _by_consumers(o: BenchOptions) -> int:
    return o.consumers


def _one(o: BenchOptions) -> int:
    return 1


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("pinned-producer", "pp", "N producers, each to its own stream (1 partition)",
             _by_producers, 1, producers=True, consumers=False),
    Workload("pinned-consumer", "pc", "N consumers, each reading its own stored stream by offset",
             _by_consumers, 1, producers=False, consumers=True, seeded=True),
    Workload("pinned-producer-and-consumer", "ppc",
             "N producers and N consumers, one stream per pair, reading while writing",
             _by_producers, 1, producers=True, consumers=True),
    Workload("balanced-producer", "bp", "N producers, balanced over M partitions of K streams",
             _one, 24, producers=True, consumers=False),
    Workload("balanced-consumer-group", "bcg",
             "N consumers in one group per stream reading stored partitions", _one, 24,
             producers=False, consumers=True, groups=True, seeded=True),
    Workload("balanced-producer-and-consumer-group", "bpcg",
             "N balanced producers, M consumers in one group per stream", _one, 24,
             producers=True, consumers=True, groups=True),
    Workload("end-to-end-producing-consumer", "e2e",
             "N actors, each sends a batch and polls it back (round-trip latency)",
             _by_producers, 1, producers=False, consumers=False, producing_consumers=True),
)}
ALIASES = {w.alias: w.name for w in WORKLOADS.values()}


def workload(name: str) -> Workload:
    """The workload by name or alias. Raises BenchOptionsError."""
    w = WORKLOADS.get(ALIASES.get(name, name))
    if w is None:
        raise BenchOptionsError(f"unknown workload {name!r}; one of {', '.join(WORKLOADS)}")
    return w


def layout(o: BenchOptions) -> Layout:
    """Streams/partitions/groups for ``o``. Raises BenchOptionsError for impossible shapes."""
    w = workload(o.workload)
    streams = o.streams or w.default_streams(o)
    partitions = o.partitions or w.default_partitions
    if w.name.startswith("pinned") or w.producing_consumers:
        partitions = 1 if o.partitions is None else partitions
        if partitions != 1:
            raise BenchOptionsError(f"{w.name} uses one partition per stream")
    if w.name in ("pinned-producer", "pinned-producer-and-consumer") and streams != o.producers:
        raise BenchOptionsError(f"{w.name}: --streams ({streams}) must equal --producers")
    if w.name == "pinned-producer-and-consumer" and o.consumers > streams:
        raise BenchOptionsError(f"{w.name}: --consumers must be <= --streams ({streams})")
    if w.name == "pinned-consumer" and streams != o.consumers:
        raise BenchOptionsError(f"{w.name}: --streams ({streams}) must equal --consumers")
    actors = o.producers if (w.producers or w.producing_consumers) else o.consumers
    if streams > actors:
        raise BenchOptionsError(f"{w.name}: --streams ({streams}) must be <= actors ({actors})")
    return Layout(streams, partitions, w.groups)


def stream_of(i: int, streams: int) -> int:
    return 1 + (i - 1) % streams


def _producers(o: BenchOptions, lay: Layout, balanced: bool) -> list[ActorSpec]:
    part = None if balanced and lay.partitions > 1 else 0
    return [ActorSpec(PRODUCER, i, stream_of(i, lay.streams), lay.partitions, part)
            for i in range(1, o.producers + 1)]


def _per_stream(count: int, streams: int, batches: int, per_batch: int) -> dict[int, int]:
    """Messages written into each stream by ``count`` actors of ``batches`` batches."""
    out = dict.fromkeys(range(1, streams + 1), 0)
    for i in range(1, count + 1):
        out[stream_of(i, streams)] += batches * per_batch
    return out


def _consumers(o: BenchOptions, w: Workload, lay: Layout) -> list[ActorSpec]:
    batches = o.message_batches
    if w.groups:
        targets = group_targets(o)
        return [ActorSpec(CONSUMER, i, s, lay.partitions, None, group=s,
                          target_messages=None if targets is None else targets[s])
                for i in range(1, o.consumers + 1) for s in [stream_of(i, lay.streams)]]
    target = None if batches is None else batches * o.messages_per_batch
    return [ActorSpec(CONSUMER, i, i, lay.partitions, 0, target_messages=target)
            for i in range(1, o.consumers + 1)]


def group_targets(o: BenchOptions) -> dict[int, int] | None:
    """Messages each stream's group must read in total (None: until the duration ends)."""
    w = workload(o.workload)
    if not w.groups:
        return {}
    lay = layout(o)
    if w.seeded:
        return _per_stream(o.consumers, lay.streams, o.seed_batches, o.messages_per_batch)
    if o.message_batches is None:
        return None
    return _per_stream(o.producers, lay.streams, o.message_batches, o.messages_per_batch)


def plan(o: BenchOptions) -> list[ActorSpec]:
    """Every actor of the run, producers first. Raises BenchOptionsError."""
    w = workload(o.workload)
    lay = layout(o)
    actors: list[ActorSpec] = []
    if w.producing_consumers:
        return [ActorSpec(PRODUCING_CONSUMER, i, stream_of(i, lay.streams), 1, 0)
                for i in range(1, o.producers + 1)]
    if w.producers:
        actors += _producers(o, lay, balanced=w.name.startswith("balanced"))
    if w.consumers:
        actors += _consumers(o, w, lay)
    return actors


def seed_plan(o: BenchOptions) -> list[ActorSpec]:
    """Producers that store the data a consumer-only workload reads: one per consumer,
    writing ``seed_batches`` batches to that consumer's stream (balanced over partitions
    for groups, partition 0 otherwise). Empty for workloads that produce their own data."""
    w = workload(o.workload)
    if not w.seeded:
        return []
    lay = layout(o)
    part = None if w.groups and lay.partitions > 1 else 0
    return [ActorSpec(PRODUCER, i, stream_of(i, lay.streams), lay.partitions, part)
            for i in range(1, o.consumers + 1)]
