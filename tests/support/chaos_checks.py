"""What a chaos test asserts once the faults are healed, as a list of findings.

``read_log`` reads a whole topic from one node (our SDK, which stays on the node it
connected to). The checks, each run on every node's log:

- ``check_producers``: offsets are dense from 0; every message is one a producer sent to that
  partition (payload and, for our SDK, id ``tag << 64 | seq``); every acknowledged message
  is present; none is present twice, except whole copies of a batch of the official client
  (it cannot set ids and resends by itself after a reconnection, so neither the test nor
  deduplication can tell its copies apart; a batch is stored whole or not at all, so a
  partial copy is still a finding); each producer's messages are in the order it sent them
  (first copies).
- ``check_consumers``: every message a consumer received is still at the offset where it
  received it, with the same id and payload.
- ``check_disk`` (nodes stopped): the segment files (``*.log``, ``*.index``) under every
  node's ``<system.path>/streams`` are the same set of files with the same bytes.

``Findings`` counts violations per check and node and keeps a few examples of each, so the
report of a run that loses thousands of messages stays readable.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from pathlib import Path

from lurcher.sdk import Client
from tests.support.chaos_traffic import (
    STREAM,
    TOPIC,
    ConsumerRecord,
    Polled,
    ProducerRecord,
    message_id,
    parse_payload,
)

EXAMPLES = 3
READ_COUNT = 1000
SEGMENT_SUFFIXES = (".log", ".index")


class Findings:
    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()
        self.examples: dict[tuple[str, str], list[str]] = defaultdict(list)

    def add(self, check: str, where: str, example: str, count: int = 1) -> None:
        key = (check, where)
        self.counts[key] += count
        if len(self.examples[key]) < EXAMPLES:
            self.examples[key].append(example)

    def __bool__(self) -> bool:
        return bool(self.counts)

    def render(self) -> str:
        return "\n".join(f"- {check} [{where}]: {n} (e.g. {'; '.join(self.examples[check, where])})"
                         for (check, where), n in sorted(self.counts.items()))


async def read_log(address: str, partitions: int) -> dict[int, list[Polled]]:
    """Every message of every partition as the node at ``address`` serves them."""
    client = Client.from_connection_string(f"iggy://iggy:iggy@{address}",
                                           heartbeat_interval_s=None, reconnection_enabled=False)
    log: dict[int, list[Polled]] = {}
    async with client:
        for partition in range(partitions):
            got: list[Polled] = []
            while True:
                polled = await asyncio.wait_for(client.poll_messages(
                    STREAM, TOPIC, partition, len(got), READ_COUNT), 10)
                batch = [(m.offset, m.id, bytes(m.payload)) for m in polled.messages()]
                if not batch:
                    break
                got.extend(batch)
            log[partition] = got
    return log


def check_producers(where: str, log: dict[int, list[Polled]],
                    producers: list[ProducerRecord], findings: Findings) -> None:
    by_tag = {p.tag: p for p in producers}
    for partition, messages in sorted(log.items()):
        place = f"{where} partition {partition}"
        offsets = [m[0] for m in messages]
        if offsets != list(range(len(messages))):
            findings.add("offsets not dense from 0", place, f"first offsets {offsets[:5]}")
        seqs: dict[int, list[int]] = defaultdict(list)
        for offset, mid, data in messages:
            parsed = parse_payload(data)
            record = by_tag.get(parsed[0]) if parsed else None
            if record is None or record.sent.get(parsed[1]) != partition:
                findings.add("a message no producer sent to this partition", place,
                             f"offset {offset} payload {data[:16]!r}")
                continue
            if record.sets_ids and mid != message_id(*parsed):
                findings.add("id does not match the payload", place, f"offset {offset}")
            seqs[record.tag].append(parsed[1])
        for record in producers:
            _check_sequence(place, f"producer {record.tag}", seqs.get(record.tag, []),
                            record, partition, findings)


def _check_sequence(place: str, who: str, seqs: list[int], record: ProducerRecord,
                    partition: int, findings: Findings) -> None:
    counts = Counter(seqs)
    twice = [s for s, n in counts.items() if n > 1 and (
        record.sets_ids or not _whole_batch_copies(s, record.batch, counts))]
    if twice:
        findings.add(f"{who}: a message present more than once", place,
                     f"seq {twice[0]} x{counts[twice[0]]}", len(twice))
    firsts = list(dict.fromkeys(seqs))
    disorder = [b for a, b in zip(firsts, firsts[1:]) if b < a]
    if disorder:
        findings.add(f"{who}: messages out of the order sent", place,
                     f"seq {disorder[0]} after a later one", len(disorder))
    missing = [s for s in record.acked.get(partition, []) if s not in counts]
    if missing:
        findings.add(f"{who}: an acknowledged message is missing", place,
                     f"seqs {missing[:3]} of {len(record.acked.get(partition, []))} acked",
                     len(missing))


def _whole_batch_copies(seq: int, batch: int, counts: Counter[int]) -> bool:
    """Every message of ``seq``'s batch is present as many times as ``seq``."""
    first = seq - seq % batch
    return all(counts[s] == counts[seq] for s in range(first, first + batch))


def check_consumers(where: str, log: dict[int, list[Polled]], consumers: list[ConsumerRecord],
                    findings: Findings) -> None:
    for record in consumers:
        for partition, received in sorted(record.received.items()):
            stored = log.get(partition, [])
            gone = [(o, m) for o, m in sorted(received.items())
                    if o >= len(stored) or stored[o][1:] != m]
            if gone:
                offset, (mid, data) = gone[0]
                findings.add(f"consumer {record.name}: a received message disappeared",
                             f"{where} partition {partition}",
                             f"offset {offset} (received {data[:12]!r})", len(gone))


def segment_files(root: Path) -> dict[str, bytes]:
    """Every segment file under ``root`` (a node's ``streams`` directory) by relative path."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.suffix in SEGMENT_SUFFIXES}


def check_disk(roots: dict[str, Path], findings: Findings) -> None:
    """Every node's segment files equal the first node's, byte for byte."""
    (first, reference), *others = [(name, segment_files(root)) for name, root in roots.items()]
    if not reference:
        findings.add("no segment file on disk", first, str(roots[first]))
    for name, files in others:
        for path in sorted(set(reference) | set(files)):
            mine, theirs = reference.get(path), files.get(path)
            if mine != theirs:
                sizes = f"{len(mine) if mine is not None else 'absent'} vs " \
                        f"{len(theirs) if theirs is not None else 'absent'} bytes"
                findings.add("replicas differ on disk", f"{first} vs {name}", f"{path}: {sizes}")
