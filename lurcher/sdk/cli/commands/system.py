"""``ping``, ``me``, ``stats``: server and session information."""

from __future__ import annotations

import time

from lurcher.sdk.cli.commands.base import Sub, leaf
from lurcher.sdk.cli.output import TRANSPORT_NAMES, human_size, human_time, human_duration_us
from lurcher.sdk.cli.runtime import Run
from lurcher.sdk.cli.values import positive_int

MS_PER_S = 1000.0


async def ping(run: Run) -> None:
    client = await run.client()
    times = []
    for _ in range(run.args.count):
        start = time.perf_counter()
        await client.ping()
        times.append((time.perf_counter() - start) * MS_PER_S)
        if not run.out.json and not run.out.quiet:
            run.out.write(f"ping {run.args.login_address}: {times[-1]:.3f} ms")
    if run.out.json:
        run.out.dump({"address": run.args.login_address, "times_ms": times})


async def me(run: Run) -> None:
    details = await (await run.client()).get_me()
    h = details.header
    pairs = [("client id", h.client_id),
             ("user id", "-" if h.user_id == 0xFFFF_FFFF else h.user_id),
             ("transport", TRANSPORT_NAMES.get(h.transport, h.transport)),
             ("address", h.address), ("consumer groups", h.consumer_groups_count)]
    pairs += [(f"group {i + 1}", f"stream {g.stream_id} topic {g.topic_id} group {g.group_id}")
              for i, g in enumerate(details.consumer_groups)]
    run.out.item(pairs, details)


async def stats(run: Run) -> None:
    s = await (await run.client()).get_stats()
    pairs = [
        ("server version", s.iggy_server_version), ("process id", s.process_id),
        ("hostname", s.hostname), ("os", f"{s.os_name} {s.os_version}"),
        ("kernel", s.kernel_version), ("threads", s.threads_count),
        ("cpu usage", f"{s.cpu_usage:.2f}%"), ("total cpu usage", f"{s.total_cpu_usage:.2f}%"),
        ("memory usage", human_size(s.memory_usage_bytes)),
        ("total memory", human_size(s.total_memory_bytes)),
        ("available memory", human_size(s.available_memory_bytes)),
        ("run time", human_duration_us(s.run_time_us)),
        ("start time", human_time(s.start_time_us)),
        ("read", human_size(s.read_bytes)), ("written", human_size(s.written_bytes)),
        ("messages size", human_size(s.messages_size_bytes)),
        ("streams", s.streams_count), ("topics", s.topics_count),
        ("partitions", s.partitions_count), ("segments", s.segments_count),
        ("messages", s.messages_count), ("clients", s.clients_count),
        ("consumer groups", s.consumer_groups_count),
        ("free disk", human_size(s.free_disk_space_bytes)),
        ("total disk", human_size(s.total_disk_space_bytes)),
    ]
    run.out.item(pairs, s)


def register(sub: Sub) -> None:
    p = leaf(sub, "ping", ping, "check that the server answers, and how fast")
    p.add_argument("-c", "--count", type=positive_int, default=1, help="pings to send")
    leaf(sub, "me", me, "this connection's client record")
    leaf(sub, "stats", stats, "server statistics")
