"""The HTTP listener's connection cap (``transports.http.admission``): its size, and one
warning per time it is reached."""

import logging
import resource

from lurcher.transports.http.admission import ConnectionCap, listener_cap


def test_the_cap_is_the_key_and_never_above_a_quarter_of_the_open_files_limit():
    assert listener_cap(1024, open_files=20_000) == 1024
    assert listener_cap(1024, open_files=256) == 64
    assert listener_cap(0, open_files=256) == 64  # no key: the quarter alone
    assert listener_cap(0, open_files=2) == 1
    # an unlimited open-files limit (-1 in Python) bounds nothing: it is no cap of 0
    assert listener_cap(5, open_files=resource.RLIM_INFINITY) == 5
    assert listener_cap(0, open_files=resource.RLIM_INFINITY) is None


def test_beyond_the_cap_is_refused_with_one_warning_until_the_count_falls_below(caplog):
    cap = ConnectionCap(2)
    with caplog.at_level(logging.WARNING):
        assert cap.admits(1) and cap.admits(2)
        assert not cap.admits(3) and not cap.admits(3)
        assert cap.admits(2)  # at the cap, not below it: no new warning next time
        assert not cap.admits(3)
        assert len(caplog.records) == 1
        assert cap.admits(1)
        assert not cap.admits(3)
        assert len(caplog.records) == 2
