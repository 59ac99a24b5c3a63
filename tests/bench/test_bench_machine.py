"""The bench's run table notes a machine that reports free memory to its host
(``host.free_page_reporting`` in ``result.json``, read by ``core.log.host_memory``)."""

from __future__ import annotations

from lurcher.bench.report import REPORTING_NOTE, table


def _doc(host: dict) -> dict:
    params = {"message_batches": 1, "duration_s": None, "transport": "tcp",
              "message_size": 1, "messages_per_batch": 1}
    return {"params": params, "workload": "pinned-producer", "target": "lurcher",
            "server": {}, "actors": [], "groups": [], "host": host}


def test_the_table_notes_a_machine_that_reports_free_pages() -> None:
    assert REPORTING_NOTE in table(_doc({"free_page_reporting": True}))
    assert REPORTING_NOTE not in table(_doc({"free_page_reporting": False}))
    assert REPORTING_NOTE not in table(_doc({}))
