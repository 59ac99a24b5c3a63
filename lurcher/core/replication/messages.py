"""The messages of Viewstamped Replication Revisited, as immutable values.

Field names follow the paper (Liskov & Cowling, MIT-CSAIL-TR-2012-021): ``view`` is the
view number, ``op`` an op-number, ``commit`` a commit-number, ``log_view`` the paper's
"last normal view" (the view in which the sender's log was last installed). One log
``Entry`` is one op-number and may carry many client requests (batching). ``replica`` is
the sender's index. ``SCHEMA`` lists each field's wire kind for ``codec``.

A ``Checkpoint`` is the service state after executing ops 1..``op`` (all committed) plus
the client table at that point. Messages that carry a log (DoViewChange, StartView,
NewState, RecoveryResponse) carry ``checkpoint`` too when the sender trimmed the ops below
it: ``log`` then starts at op ``checkpoint.op + 1`` (``after``), otherwise at op 1 (or at
``NewState.after + 1``). ``checkpoint`` is the last field so older positional uses hold.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec


class Request(msgspec.Struct, frozen=True):
    """A client operation; ``request`` numbers are per client and increase by one."""

    client: int
    request: int
    body: bytes
    SCHEMA: ClassVar[tuple[str, ...]] = ("u64", "u64", "blob")


class Entry(msgspec.Struct, frozen=True):
    """One op of the log: assigned in ``view`` at ``op``, carrying a batch of requests."""

    view: int
    op: int
    requests: tuple[Request, ...]
    SCHEMA: ClassVar[tuple[str, ...]] = ("u64", "u64", "requests")


def entry_bytes(entry: Entry) -> int:
    """The bytes of ``entry``'s request bodies (what bounds memory and frames)."""
    return sum(len(req.body) for req in entry.requests)


class ClientSlot(msgspec.Struct, frozen=True):
    """One client-table row: the client's latest executed request and its result."""

    client: int
    request: int
    result: bytes
    SCHEMA: ClassVar[tuple[str, ...]] = ("u64", "u64", "blob")


class Checkpoint(msgspec.Struct, frozen=True):
    """The service ``state`` after ops 1..``op`` and the client ``table`` at that op."""

    op: int
    state: bytes
    table: tuple[ClientSlot, ...]
    SCHEMA: ClassVar[tuple[str, ...]] = ("u64", "blob", "table")


def after_of(checkpoint: Checkpoint | None) -> int:
    """The op a log carried next to ``checkpoint`` starts after."""
    return checkpoint.op if checkpoint is not None else 0


class Reply(msgspec.Struct, frozen=True):
    view: int
    client: int
    request: int
    result: bytes
    SCHEMA: ClassVar[tuple[str, ...]] = ("u64", "u64", "u64", "blob")


class Prepare(msgspec.Struct, frozen=True):
    view: int
    commit: int
    entry: Entry
    replica: int
    SCHEMA: ClassVar[tuple[str, ...]] = ("u64", "u64", "entry", "u8")


class PrepareOk(msgspec.Struct, frozen=True):
    view: int
    op: int
    replica: int
    SCHEMA: ClassVar[tuple[str, ...]] = ("u64", "u64", "u8")


class Commit(msgspec.Struct, frozen=True):
    view: int
    commit: int
    replica: int
    SCHEMA: ClassVar[tuple[str, ...]] = ("u64", "u64", "u8")


class StartViewChange(msgspec.Struct, frozen=True):
    view: int
    replica: int
    SCHEMA: ClassVar[tuple[str, ...]] = ("u64", "u8")


class DoViewChange(msgspec.Struct, frozen=True):
    view: int
    log_view: int
    commit: int
    log: tuple[Entry, ...]
    replica: int
    checkpoint: Checkpoint | None = None
    SCHEMA: ClassVar[tuple[str, ...]] = ("u64", "u64", "u64", "log", "u8", "optckpt")

    @property
    def after(self) -> int:
        return after_of(self.checkpoint)

    @property
    def op(self) -> int:
        return self.after + len(self.log)


class StartView(msgspec.Struct, frozen=True):
    view: int
    commit: int
    log: tuple[Entry, ...]
    replica: int
    checkpoint: Checkpoint | None = None
    SCHEMA: ClassVar[tuple[str, ...]] = ("u64", "u64", "log", "u8", "optckpt")

    @property
    def after(self) -> int:
        return after_of(self.checkpoint)


class Recovery(msgspec.Struct, frozen=True):
    nonce: int
    replica: int
    SCHEMA: ClassVar[tuple[str, ...]] = ("u64", "u8")


class RecoveryResponse(msgspec.Struct, frozen=True):
    """``log`` is None unless the sender is the primary of ``view``."""

    view: int
    nonce: int
    commit: int
    log: tuple[Entry, ...] | None
    replica: int
    checkpoint: Checkpoint | None = None
    SCHEMA: ClassVar[tuple[str, ...]] = ("u64", "u64", "u64", "optlog", "u8", "optckpt")

    @property
    def after(self) -> int:
        return after_of(self.checkpoint)


class GetState(msgspec.Struct, frozen=True):
    """Asks for the log after ``op`` (the sender keeps ops 1..op)."""

    view: int
    op: int
    replica: int
    SCHEMA: ClassVar[tuple[str, ...]] = ("u64", "u64", "u8")


class NewState(msgspec.Struct, frozen=True):
    """The log after ``after`` (ops after+1..) and the sender's commit-number.

    When the asked-for ops were trimmed, ``checkpoint`` is the sender's and ``after`` is
    ``checkpoint.op``."""

    view: int
    after: int
    commit: int
    log: tuple[Entry, ...]
    replica: int
    checkpoint: Checkpoint | None = None
    SCHEMA: ClassVar[tuple[str, ...]] = ("u64", "u64", "u64", "log", "u8", "optckpt")


MESSAGE_TYPES: tuple[type[msgspec.Struct], ...] = (
    Request, Reply, Prepare, PrepareOk, Commit, StartViewChange, DoViewChange,
    StartView, Recovery, RecoveryResponse, GetState, NewState,
)
"""Index + 1 is each type's tag byte on the wire."""

Message = (Request | Reply | Prepare | PrepareOk | Commit | StartViewChange | DoViewChange
           | StartView | Recovery | RecoveryResponse | GetState | NewState)
