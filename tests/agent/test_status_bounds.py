"""Every file an agent writes fits the size bound its readers read (``max_file_bytes``).

Issue 24, item 3: with a bound of 4096 bytes an agent wrote a status of a request of 36 long
table names over its own bound, could not read it back, took it for another agent's and left
the request ``running`` for ever. Now a status that would not fit is never written: the request
fails, in a status that fits, with a one-line reason.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from agent_parts_helpers import Environment, attempt, held_by

from fdcore.abc import TableResult
from fdcore.contract.codec import decode, encode
from fdcore.contract.layout import status_key
from fdcore.contract.models import Incident, IncidentDocument, Outcome, State, Status
from fdcore.errors import FileTooLarge, RequestError
from fdcore.incidents.book import IncidentBook
from fdcore.mailbox.access import Mailbox, full_status
from fdcore.mailbox.submit import submit
from fdcore.testing.memory_fleet import START

BOUND = 4096
#: 36 tables with long names: the request fits 4096 bytes, its status with them all done not.
TABLES = [f"table-{n:02d}-" + "x" * 91 for n in range(36)]


def stored(env: Environment, request_id: str) -> tuple[Status, int]:
    """The status as stored, read as a reader bound by BOUND reads it, and its size."""
    blob = env.storage.read(status_key(request_id))
    assert blob is not None
    return decode(Status, blob.data, status_key(request_id), BOUND), len(blob.data)


def test_the_request_fits_but_its_status_with_every_table_done_does_not() -> None:
    env = Environment()
    env.submit("big", *TABLES)
    request = env.mailbox.request("big")
    assert request is not None
    assert len(encode(request.value)) <= BOUND < len(encode(full_status(request.value, "etl-01")))


def test_a_request_whose_status_cannot_fit_fails_at_its_claim(
    env: Environment, caplog: pytest.LogCaptureFixture
) -> None:
    env.submit("big", *TABLES)
    env.mailbox.max_file_bytes = BOUND  # the agent's bound, as [agent] max_file_bytes sets it
    config = env.config(max_file_bytes=BOUND)
    holdings = env.holdings(config)
    changes = env.status_changes(config, holdings)
    request = env.mailbox.request("big")
    assert request is not None
    with caplog.at_level(logging.WARNING):
        changes.claim(request.value, START, start=True)
    status, size = stored(env, "big")
    assert size <= BOUND
    assert status.state is State.FAILED and status.agent == "etl-01"
    assert [(a.agent, a.outcome) for a in status.attempts] == [("etl-01", Outcome.FAILED)]
    assert status.message is not None and "\n" not in status.message
    assert "with its 36 tables done, over the bound of 4096 bytes" in status.message
    assert holdings.work == {} and "big" in holdings.final
    assert "no longer mine" not in caplog.text
    assert f"request big failed: {status.message}" in caplog.text


def test_a_change_that_would_not_fit_fails_the_request_in_a_status_that_fits(
    env: Environment, caplog: pytest.LogCaptureFixture
) -> None:
    env.submit("r1", "sales")
    env.mailbox.max_file_bytes = BOUND
    config = env.config(max_file_bytes=BOUND)
    holdings = env.holdings(config)
    changes = env.status_changes(config, holdings)
    work = env.claimed(changes, holdings, "r1")
    with caplog.at_level(logging.WARNING):
        # a table's failure with a message longer than the bound (a Python table's exception)
        assert not changes.fail(work, "table sales failed: " + "why " * 2000, START)
    status, size = stored(env, "r1")
    assert size <= BOUND
    assert status.state is State.FAILED
    assert status.message is not None and status.message.startswith("its status would be ")
    assert "over the bound of 4096 bytes its readers read (max_file_bytes)" in status.message
    assert status.attempts[-1].outcome is Outcome.FAILED
    assert holdings.work == {} and "r1" in holdings.final
    assert "no longer mine" not in caplog.text


def test_a_takeover_that_would_not_fit_fails_the_request_keeping_what_fits(
    env: Environment,
) -> None:
    env.submit("r1", "sales")
    # Written by a fleet with a larger bound, or by hand: 50 bytes short of the bound.
    attempts = [attempt(n + 1, f"agent-{n}") for n in range(5)]
    for earlier in attempts[:-1]:
        earlier.outcome, earlier.ended_at, earlier.message = Outcome.STOPPED, START, ""
    found = held_by("r1", "agent-4", *attempts)
    attempts[0].message = "m" * (BOUND - 50 - len(encode(found)))
    env.write_status(found)
    env.mailbox.max_file_bytes = BOUND
    assert len(encode(env.status("r1"))) == BOUND - 50  # as found, it fits; one attempt more not
    config = env.config(max_file_bytes=BOUND, max_attempts=100)
    holdings = env.holdings(config)
    changes = env.status_changes(config, holdings)
    found = env.mailbox.status("r1")
    request = env.mailbox.request("r1")
    assert found is not None and request is not None
    changes.take_over(found, request.value, START + timedelta(hours=1), "lost", lost=True)
    status, size = stored(env, "r1")
    assert size <= BOUND and status.state is State.FAILED
    assert status.agent == "etl-01" and status.attempt == 6
    assert status.attempts[-1].agent == "etl-01"
    assert status.attempts[-1].outcome is Outcome.FAILED
    assert holdings.work == {} and "r1" in holdings.final


def test_no_mailbox_write_goes_over_the_bound(env: Environment) -> None:
    env.submit("big", *TABLES)
    request = env.mailbox.request("big")
    assert request is not None
    mailbox = Mailbox(env.storage, max_file_bytes=BOUND)
    with pytest.raises(FileTooLarge, match=r"status/big.json: not written: \d+ bytes, over"):
        mailbox.create(status_key("big"), full_status(request.value, "etl-01"))
    assert env.storage.read(status_key("big")) is None


def test_submit_refuses_a_request_whose_status_would_not_fit() -> None:
    env = Environment()
    mailbox = Mailbox(env.storage, max_file_bytes=BOUND)
    with pytest.raises(RequestError, match=r"request big not submitted: its status would be"):
        submit(mailbox, TABLES, request_id="big")
    assert env.mailbox.request("big") is None
    submit(mailbox, TABLES[:20], request_id="fits")  # what fits is submitted as before


def test_a_run_record_keeps_the_end_of_the_output_that_fits(env: Environment) -> None:
    env.submit("r1", "sales")
    env.mailbox.max_file_bytes = BOUND
    config = env.config(max_file_bytes=BOUND)
    tables, changes, holdings = env.tables(config)
    work = env.claimed(changes, holdings, "r1")
    held = env.leases.acquire("sales", "etl-01", "r1", 1, 60.0, START)
    assert held is not None
    output = "".join(f'line {n}: "quoted" \t\x01\n' for n in range(400))
    result = TableResult(False, "x" * 3000, exit_code=1, output=output)
    tables.write_run_record(work, held, 1, Outcome.FAILED, result, START)
    [record] = env.mailbox.runs("r1")  # read with the bound: it was written within it
    assert record.output is not None and record.output.endswith('line 399: "quoted" \t\x01\n')
    assert record.exit_code == 1 and record.message is not None


def test_a_run_record_keeps_a_failed_tables_stdout_tail_within_the_bound(
    env: Environment,
) -> None:
    env.submit("r1", "sales")
    env.mailbox.max_file_bytes = BOUND
    config = env.config(max_file_bytes=BOUND)
    tables, changes, holdings = env.tables(config)
    work = env.claimed(changes, holdings, "r1")
    held = env.leases.acquire("sales", "etl-01", "r1", 1, 60.0, START)
    assert held is not None
    stdout = "".join(f"row {n} loaded\n" for n in range(400))
    result = TableResult(False, "exit code 3: bad row 17", 3, "bad row 17\n", stdout=stdout)
    tables.write_run_record(work, held, 1, Outcome.FAILED, result, START)
    [record] = env.mailbox.runs("r1")  # read with the bound: it was written within it
    assert record.output == "bad row 17\n"  # stderr says why: cut last
    assert record.stdout is not None and record.stdout.endswith("row 399 loaded\n")
    assert record.stdout.startswith("row ")


def test_an_agent_record_leaves_out_its_request_ids_before_it_would_overflow(
    env: Environment,
) -> None:
    ids = [f"r{n:02d}-" + "z" * 120 for n in range(40)]  # 40 held requests: 5 KB of ids
    for request_id in ids:
        env.submit(request_id, "sales")
    env.mailbox.max_file_bytes = BOUND
    config = env.config(max_file_bytes=BOUND, concurrency=64)
    presence, holdings = env.presence(config)
    changes = env.status_changes(config, holdings)
    for request_id in ids:
        env.claimed(changes, holdings, request_id)
    presence.write(START, stopping=False)
    record = env.mailbox.agent("etl-01")  # read within the bound: it was written within it
    assert record is not None and record.value.requests == []
    del holdings.work[ids[0]]
    for request_id in ids[1:30]:
        del holdings.work[request_id]
    presence.write(START + timedelta(seconds=1), stopping=False)
    record = env.mailbox.agent("etl-01")
    assert record is not None and record.value.requests == sorted(ids[30:])  # fits: kept


def test_the_incident_document_keeps_the_newest_resolved_incidents_that_fit(
    env: Environment,
) -> None:
    env.mailbox.max_file_bytes = BOUND
    book = IncidentBook(env.mailbox)

    def resolve_many(document: IncidentDocument) -> None:
        for n in range(40):
            document.resolved.append(
                Incident(f"inc-{n:04d}", f"request_failed:r{n}", f"request r{n} failed", START, "a")
            )

    book.change(resolve_many)
    found = env.mailbox.incidents()  # read within the bound
    assert found is not None
    kept = [incident.id for incident in found.value.resolved]
    assert kept and kept[-1] == "inc-0039" and len(kept) < 40
    assert kept == [f"inc-{n:04d}" for n in range(40 - len(kept), 40)]
