"""``links.RefusalLog``: one line of each kind of refusal a second, the rest counted."""

from __future__ import annotations

import logging

from lurcher.cluster.links import REFUSAL_LOG_S, RefusalLog


def test_one_line_per_kind_per_interval_and_the_rest_counted(caplog) -> None:
    refusals = RefusalLog()
    with caplog.at_level(logging.WARNING, logger="lurcher.cluster.links"):
        for i in range(50):
            refusals.warn(0.001 * i, "refused: %s", "bad magic")
        refusals.warn(0.0, "late: %d", 7)  # another kind is not held back
        refusals.warn(REFUSAL_LOG_S, "refused: %s", "bad magic")
    assert caplog.messages == ["refused: bad magic", "late: 7",
                               "refused: bad magic (49 more since the last such line)"]
