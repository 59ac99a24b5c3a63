"""Server-side deduplication by message id (``system.message_deduplication``) on a real
server: repeated ids are dropped within the window (across batches and inside one batch),
a batch of duplicates only is answered OK and stores nothing, offsets stay dense, id 0 is
never a duplicate, windows are per partition, and ids are accepted again after expiry."""

from __future__ import annotations

import time

from tests.support import raw

ENV = {"LURCHER_SYSTEM_MESSAGE_DEDUPLICATION_ENABLED": "true",
       "LURCHER_SYSTEM_MESSAGE_DEDUPLICATION_EXPIRY": "1 s"}
# for the tests of what happens within the window: one no loaded machine outlasts
WINDOW_ENV = {**ENV, "LURCHER_SYSTEM_MESSAGE_DEDUPLICATION_EXPIRY": "1 min"}


def send(c: raw.RawClient, ids: list[int], partition: int = 0) -> None:
    c.send("s", "t", raw.partition_id(partition),
           [raw.message(f"m{i}".encode(), message_id=i) for i in ids])


def stored(c: raw.RawClient, partition: int = 0) -> list[tuple[int, int]]:
    return [(m.offset, m.message_id) for m in c.poll_all("s", "t", partition)]


def open_topic(server) -> raw.RawClient:
    c = raw.RawClient(server.tcp_address)
    c.login()
    c.create_stream("s")
    c.create_topic("s", "t", 2)
    return c


def test_duplicates_are_dropped_within_the_window(server_factory):
    with open_topic(server_factory(WINDOW_ENV)) as c:
        send(c, list(range(1, 11)))
        send(c, list(range(5, 16)))                 # 5..10 repeat
        send(c, [20, 21, 20, 22, 21])               # repeats inside one batch
        send(c, [1, 2, 3])                          # all duplicates: OK, nothing stored
        got = stored(c)
        assert [i for _, i in got] == [*range(1, 16), 20, 21, 22]
        assert [o for o, _ in got] == list(range(len(got)))
        assert all(m.checksum_ok() for m in c.poll_all("s", "t", 0))
        send(c, [1, 2])
        send(c, [1, 2], partition=1)                # windows are per partition
        assert len(stored(c)) == len(got) and [i for _, i in stored(c, 1)] == [1, 2]


def test_ids_are_accepted_again_after_expiry(server_factory):
    with open_topic(server_factory(ENV)) as c:
        send(c, [7, 8])
        time.sleep(1.1)
        send(c, [7, 9])
        assert [i for _, i in stored(c)] == [7, 8, 7, 9]


def test_id_zero_is_never_a_duplicate(server_factory):
    with open_topic(server_factory(WINDOW_ENV)) as c:
        send(c, [0, 0, 0])
        send(c, [0])
        ids = [i for _, i in stored(c)]
        assert len(ids) == 4 and 0 not in ids and len(set(ids)) == 4


def test_disabled_by_default(server):
    with open_topic(server) as c:
        send(c, [1, 1])
        send(c, [1])
        assert [i for _, i in stored(c)] == [1, 1, 1]
