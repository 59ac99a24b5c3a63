"""``ClientConfig`` built by hand (no server): durations and counts out of range are refused
when the config is made, naming the field."""

from __future__ import annotations

import math

import msgspec
import pytest

from lurcher.sdk import Client, ClientConfig, ErrorCode, InvalidArgument


@pytest.mark.parametrize("field,value", [
    ("request_timeout_s", -1), ("request_timeout_s", 0), ("connect_timeout_s", -1),
    ("connect_timeout_s", None), ("connect_timeout_s", math.nan),
    ("heartbeat_interval_s", 0), ("heartbeat_interval_s", -5.0),
    ("reconnection_interval_s", -0.5), ("reestablish_after_s", math.inf),
    ("reconnection_retries", -1), ("request_timeout_s", "10"), ("reconnection_retries", True),
])
def test_a_duration_or_count_out_of_range_is_refused_naming_it(field: str, value: object) -> None:
    """Each was taken: a negative or zero timeout ended every request at once in
    TaskTimeout ("no response to command 38 within -1s"), a negative retry count retried
    nothing without saying so."""
    for make in (lambda: Client("127.0.0.1:8090", **{field: value}),
                 lambda: msgspec.structs.replace(ClientConfig(), **{field: value})):
        with pytest.raises(InvalidArgument) as caught:
            make()
        assert caught.value.code == ErrorCode.INVALID_CONFIGURATION
        assert str(caught.value).count(field) == 1 and isinstance(caught.value, ValueError)


def test_the_values_that_mean_something_are_taken() -> None:
    config = ClientConfig(request_timeout_s=None, heartbeat_interval_s=None,
                          reconnection_retries=None, reconnection_interval_s=0,
                          reestablish_after_s=0.0, connect_timeout_s=0.001)
    assert config.request_timeout_s is None and config.reconnection_interval_s == 0
    assert ClientConfig(reconnection_retries=0).reconnection_retries == 0
