"""Vectorised validation of the user-headers blocks of a whole batch (send hot path).

The rules and codes are those of ``core.wire.headers`` (the 0.8 rules, as the official
client decodes a polled block): kind 0, a field length outside 1..255 or an odd number of
fields -> INVALID_FORMAT; a truncated field -> INVALID_COMMAND; kind above 15 ->
INVALID_HEADER_KIND; a fixed-size kind with another length -> INVALID_HEADER_KEY (key) or
INVALID_HEADER_VALUE (value). Block sizes (<= 100 000 bytes) are checked by the batch.

Invariant: no Python loop over messages or fields where the C helper is built
(``_batchhash.header_blocks``, one call per batch, block by block). Without it the walk
advances one field of every block at a time with numpy, so its Python iterations are bounded
by the largest number of fields in one block (at most 100 000 / 6), whatever the number of
messages: blocks of one-byte fields cost about 3 ms per 1,000 fields, so a 64 MB batch of them
held the event loop about 2 s. Messages without headers cost nothing. With several faults
the one reported may differ from the server's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lurcher.core.wire.buffer import Buffer
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.headers import FIXED_SIZES, MAX_HEADER_FIELD_BYTES, HeaderKind

TLV_HEAD_BYTES = 5  # kind u8 + length u32
_FIXED = np.zeros(256, dtype=np.int64)  # kind -> exact length, 0 = variable (or unknown)
for _kind, _size in FIXED_SIZES.items():
    _FIXED[int(_kind)] = _size
_SHIFTS = np.array([0, 8, 16, 24], dtype=np.int64)


def _fail(code: ErrorCode, bad: np.ndarray, messages: np.ndarray, what: str) -> IggyError:
    return IggyError(code, f"user headers: {what} (message {int(messages[np.argmax(bad)])})")


# The faults ``_batchhash.header_blocks`` reports (its HB_* numbers), as codes and words.
_NATIVE_FAULTS = {1: (ErrorCode.INVALID_FORMAT, "kind 0"),
                  2: (ErrorCode.INVALID_COMMAND, "truncated field"),
                  3: (ErrorCode.INVALID_FORMAT, "field length"),
                  4: (ErrorCode.INVALID_FORMAT, "odd number of fields"),
                  5: (ErrorCode.INVALID_HEADER_KIND, "unknown kind")}


def _native_helper() -> Any:
    try:
        from lurcher.core.wire import _batchhash
    except ImportError:  # built at install time where a C compiler is found (setup.py)
        return None
    return getattr(_batchhash, "header_blocks", None)


_native = _native_helper()


def validate_header_blocks(blob: Buffer, begins: np.ndarray, ends: np.ndarray,
                           messages: np.ndarray) -> None:
    """Check the blocks ``blob[begins[i]:ends[i]]`` (non-empty, inside ``blob``);
    ``messages`` numbers them in errors. Raises IggyError (codes in the module docstring)."""
    if not len(begins):
        return
    if _native is not None:
        _native_check(blob, begins, ends, messages)
        return
    data = np.frombuffer(blob, dtype=np.uint8)
    cursor = np.asarray(begins, dtype=np.int64).copy()
    ends = np.asarray(ends, dtype=np.int64)
    fields = np.zeros(len(cursor), dtype=np.int64)
    kinds, lengths, is_key, owner = [], [], [], []
    active = np.arange(len(cursor))
    while active.size:
        at, end = cursor[active], ends[active]
        kind = data[at].astype(np.int64)
        if (kind == 0).any():
            raise _fail(ErrorCode.INVALID_FORMAT, kind == 0, messages[active], "kind 0")
        if (at + TLV_HEAD_BYTES > end).any():
            raise _fail(ErrorCode.INVALID_COMMAND, at + TLV_HEAD_BYTES > end, messages[active],
                        "truncated field")
        length = (data[(at + 1)[:, None] + np.arange(4)].astype(np.int64) << _SHIFTS).sum(1)
        bad = (length < 1) | (length > MAX_HEADER_FIELD_BYTES)
        if bad.any():
            raise _fail(ErrorCode.INVALID_FORMAT, bad, messages[active], "field length")
        after = at + TLV_HEAD_BYTES + length
        if (after > end).any():
            raise _fail(ErrorCode.INVALID_COMMAND, after > end, messages[active],
                        "truncated field")
        kinds.append(kind)
        lengths.append(length)
        is_key.append(fields[active] % 2 == 0)
        owner.append(active)
        fields[active] += 1
        cursor[active] = after
        active = active[after < end]
    if (fields % 2).any():
        raise _fail(ErrorCode.INVALID_FORMAT, fields % 2 == 1, messages, "odd number of fields")
    _check_kinds(np.concatenate(kinds), np.concatenate(lengths), np.concatenate(is_key),
                 messages[np.concatenate(owner)])


def _native_check(blob: Buffer, begins: np.ndarray, ends: np.ndarray,
                  messages: np.ndarray) -> None:
    found = _native(blob, np.ascontiguousarray(begins, dtype=np.int64),
                    np.ascontiguousarray(ends, dtype=np.int64), _FIXED,
                    int(HeaderKind.FLOAT64), MAX_HEADER_FIELD_BYTES)
    if found is None:
        return
    block, fault, is_key = found
    if fault in _NATIVE_FAULTS:
        code, what = _NATIVE_FAULTS[fault]
    else:  # a fixed-size kind with another length
        code = ErrorCode.INVALID_HEADER_KEY if is_key else ErrorCode.INVALID_HEADER_VALUE
        what = "fixed-size kind with another length"
    raise IggyError(code, f"user headers: {what} (message {int(messages[block])})")


def _check_kinds(kinds: np.ndarray, lengths: np.ndarray, is_key: np.ndarray,
                 messages: np.ndarray) -> None:
    """The first field (in walk order) of an unknown kind or a wrong fixed size fails."""
    unknown = kinds > int(HeaderKind.FLOAT64)
    expected = _FIXED[np.minimum(kinds, 255)]
    bad = unknown | ((expected != 0) & (expected != lengths))
    if not bad.any():
        return
    first = int(np.argmax(bad))
    if unknown[first]:
        raise _fail(ErrorCode.INVALID_HEADER_KIND, bad, messages, "unknown kind")
    code = ErrorCode.INVALID_HEADER_KEY if is_key[first] else ErrorCode.INVALID_HEADER_VALUE
    raise _fail(code, bad, messages, "fixed-size kind with another length")
