"""The node-to-node link state machine: handshake, authentication, framing, refusals."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lurcher.core.replication.link import (
    FRAME_HEADER, HELLO_FIXED, MAGIC, VERSION, Established, PeerLink, Received, Refused,
)
from lurcher.core.replication.messages import Commit, Prepare, Entry, Request


def pair(secret_a: bytes = b"s3cret", secret_b: bytes = b"s3cret", cluster_b: str = "c1"):
    return (PeerLink("c1", secret_a, 0, b"a" * 16, dialer=True),
            PeerLink(cluster_b, secret_b, 1, b"b" * 16, dialer=False))


def handshake(a: PeerLink, b: PeerLink) -> tuple[list, list]:
    ev_b = b.receive_data(a.hello())
    ev_a = a.receive_data(b.hello() + b.take_output())
    ev_b += b.receive_data(a.take_output())
    return ev_a, ev_b


def test_same_secret_establishes_both_ends() -> None:
    a, b = pair()
    ev_a, ev_b = handshake(a, b)
    assert ev_a == [Established(1)] and ev_b == [Established(0)]
    msg = Prepare(3, 1, Entry(3, 2, (Request(7, 1, b"x"),)), 0)
    assert b.receive_data(a.send(5, msg)) == [Received(5, msg)]


def test_wrong_secret_is_refused_with_a_reason_and_nothing_more_is_read() -> None:
    a, b = pair(secret_b=b"other")
    ev_a, ev_b = handshake(a, b)
    assert isinstance(ev_a[0], Refused) and "secret" in ev_a[0].reason
    assert isinstance(ev_b[0], Refused)
    assert a.receive_data(b"anything") == [] and not a.established


def test_wrong_cluster_name_is_refused() -> None:
    a, b = pair(cluster_b="c2")
    [refused] = b.receive_data(a.hello())
    assert isinstance(refused, Refused) and "'c1'" in refused.reason and "'c2'" in refused.reason


def test_a_replayed_proof_does_not_authenticate() -> None:
    a, b = pair()
    handshake(a, b)
    recorded_hello, recorded_proof = a.hello(), None
    b2 = PeerLink("c1", b"s3cret", 1, b"c" * 16, dialer=False)  # a fresh nonce, the victim
    b2.receive_data(recorded_hello)
    a_old = PeerLink("c1", b"s3cret", 0, b"a" * 16, dialer=True)
    a_old.receive_data(PeerLink("c1", b"s3cret", 1, b"b" * 16, dialer=False).hello())
    recorded_proof = a_old.take_output()  # a proof made for another nonce
    [refused] = b2.receive_data(recorded_proof)
    assert isinstance(refused, Refused)


def test_bytes_split_anywhere_give_the_same_events() -> None:
    a, b = pair()
    handshake(a, b)
    msgs = [Commit(1, i, 0) for i in range(5)]
    stream = b"".join(a.send(0, m) for m in msgs)
    for cut in range(1, len(stream)):
        c = PeerLink("c1", b"s3cret", 1, b"b" * 16, dialer=False)
        handshake(PeerLink("c1", b"s3cret", 0, b"a" * 16, dialer=True), c)
        events = c.receive_data(stream[:cut]) + c.receive_data(stream[cut:])
        assert events == [Received(0, m) for m in msgs]


def test_oversized_and_undecodable_frames_are_refused() -> None:
    a, b = pair()
    b.max_frame_bytes = 100
    handshake(a, b)
    [big] = b.receive_data(FRAME_HEADER.pack(1000, 0))
    assert isinstance(big, Refused) and "limit 100" in big.reason
    a2, b2 = pair()
    handshake(a2, b2)
    [bad] = b2.receive_data(FRAME_HEADER.pack(6, 0) + b"\xff\x00")
    assert isinstance(bad, Refused) and "undecodable" in bad.reason


def test_a_peer_claiming_our_index_is_refused() -> None:
    a = PeerLink("c1", b"k", 0, b"a" * 16, dialer=True)
    [refused] = a.receive_data(PeerLink("c1", b"k", 0, b"z" * 16, dialer=True).hello())
    assert isinstance(refused, Refused) and "own index" in refused.reason


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.booleans())
def test_arbitrary_bytes_give_events_or_a_refusal_never_an_exception(data: bytes,
                                                                       after_auth: bool) -> None:
    a, b = pair()
    if after_auth:
        handshake(a, b)
    events = b.receive_data(data)
    assert all(isinstance(e, (Established, Received, Refused)) for e in events)


def hello_as(index: int, nonce: bytes) -> bytes:
    """A hello anyone can write: no secret in it."""
    return HELLO_FIXED.pack(MAGIC, VERSION, index, nonce, 2) + b"c1"


def test_a_node_is_no_oracle_for_another_nodes_proof() -> None:
    """Someone without the secret dials nodes 0 and 1, hands node 1 the nonce node 0 sent
    and passes node 1's proof on to node 0 as its own: node 0 must not take it for node 1.
    Nor when node 1 dialed it (it holds node 2's address): that proof was made for node 2.
    Each proof says which end of a connection made it (dialer, acceptor), and for whom."""
    node0 = PeerLink("c1", b"s3cret", 0, b"a" * 16, dialer=False)
    node1 = PeerLink("c1", b"s3cret", 1, b"b" * 16, dialer=False)
    node1.receive_data(hello_as(2, node0.hello()[6:22]))
    events = node0.receive_data(hello_as(1, bytes(16)) + node1.take_output())
    assert [type(e) for e in events] == [Refused] and not node0.established
    node0 = PeerLink("c1", b"s3cret", 0, b"c" * 16, dialer=False)
    node1 = PeerLink("c1", b"s3cret", 1, b"d" * 16, dialer=True)
    node1.receive_data(hello_as(2, node0.hello()[6:22]))
    events = node0.receive_data(hello_as(1, bytes(16)) + node1.take_output())
    assert [type(e) for e in events] == [Refused] and not node0.established


def test_a_dialer_sends_no_proof_to_a_hello_from_another_node_than_it_dialed() -> None:
    """Node 1 dialed node 2's address; whoever answers there claiming node 0 (with node 0's
    nonce) gets no proof: a dialer's proof for node 0 is what node 0 accepts from node 1."""
    node0 = PeerLink("c1", b"s3cret", 0, b"e" * 16, dialer=False)
    node1 = PeerLink("c1", b"s3cret", 1, b"f" * 16, dialer=True, expect=2)
    [refused] = node1.receive_data(hello_as(0, node0.hello()[6:22]))
    assert isinstance(refused, Refused) and "answered as node 0" in refused.reason
    assert node1.take_output() == b""
