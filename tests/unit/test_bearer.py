"""``bearer_credentials``: the one reading of ``Authorization: Bearer`` that the HTTP API and
``lurcher-mcp`` share."""

import pytest

from lurcher.transports.http.bearer import bearer_credentials


@pytest.mark.parametrize("value, credentials", [
    (b"Bearer abc", b"abc"),
    (b"bearer abc", b"abc"),     # RFC 9110: the scheme in any case
    (b"BEARER  abc ", b"abc"),   # whitespace around the credentials dropped
    (b"Basic abc", b""),
    (b"Bearer", b""),
    (b"Bearer   ", b""),
    (b"", b""),
])
def test_the_scheme_is_matched_in_any_case_and_anything_else_reads_as_nothing(value,
                                                                               credentials):
    assert bearer_credentials([(b"host", b"x"), (b"authorization", value)]) == credentials


def test_the_first_authorization_header_counts_and_none_reads_as_nothing():
    assert bearer_credentials([(b"authorization", b"Bearer one"),
                               (b"authorization", b"Bearer two")]) == b"one"
    assert bearer_credentials([(b"host", b"x")]) == b""
