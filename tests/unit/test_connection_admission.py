"""The listeners' connection caps (``transports.admission``): their size (HTTP: a quarter of
the open-files limit; the binary listeners: what the segment files, HTTP's share and the
other descriptors leave, at least a quarter), the count a binary cap keeps, and one warning
per time a cap is reached."""

import logging
import resource

from lurcher.transports.admission import (OTHER_DESCRIPTORS, ConnectionCap, binary_cap,
                                          listener_cap)


def test_the_cap_is_the_key_and_never_above_a_quarter_of_the_open_files_limit():
    assert listener_cap(1024, open_files=20_000) == 1024
    assert listener_cap(1024, open_files=256) == 64
    assert listener_cap(0, open_files=256) == 64  # no key: the quarter alone
    assert listener_cap(0, open_files=2) == 1
    # an unlimited open-files limit (-1 in Python) bounds nothing: it is no cap of 0
    assert listener_cap(5, open_files=resource.RLIM_INFINITY) == 5
    assert listener_cap(0, open_files=resource.RLIM_INFINITY) is None


def test_the_binary_cap_leaves_the_segment_files_http_and_the_rest_their_descriptors():
    # 10,000 open files: 512 segment files, HTTP's 1024 and the others set aside
    left = 10_000 - 512 - 1024 - OTHER_DESCRIPTORS
    assert binary_cap(100_000, 512, 1024, open_files=10_000) == left
    assert binary_cap(0, 512, 1024, open_files=10_000) == left  # no key: the bound alone
    assert binary_cap(5000, 512, 0, open_files=10_000) == 5000
    # a limit too low for all of them: a quarter of it, the segment cache gives way
    assert binary_cap(10_000, 512, 100, open_files=400) == 100
    assert binary_cap(10_000, 512, 0, open_files=2) == 1
    assert binary_cap(7, 512, 0, open_files=resource.RLIM_INFINITY) == 7
    assert binary_cap(0, 512, 0, open_files=resource.RLIM_INFINITY) is None


def test_beyond_the_cap_is_refused_with_one_warning_until_the_count_falls_below(caplog):
    cap = ConnectionCap(2, "cap reached")
    with caplog.at_level(logging.WARNING):
        assert cap.admits(1) and cap.admits(2)
        assert not cap.admits(3) and not cap.admits(3)
        assert cap.admits(2)  # at the cap, not below it: no new warning next time
        assert not cap.admits(3)
        assert len(caplog.records) == 1
        assert cap.admits(1)
        assert not cap.admits(3)
        assert len(caplog.records) == 2


def test_a_counting_cap_refuses_beyond_it_uncounted_and_adopts_past_it(caplog):
    cap = ConnectionCap(2, "cap reached")
    with caplog.at_level(logging.WARNING):
        assert cap.admit() and cap.admit()
        assert not cap.admit() and not cap.admit()
        assert cap.open == 2  # the refused ones are not counted
        cap.adopt()  # a migrated connection stays whatever the count
        assert cap.open == 3 and not cap.admit()
        for _ in range(3):
            cap.release()
        assert cap.open == 0 and cap.admit()
        assert [r.getMessage() for r in caplog.records] == ["cap reached"]
