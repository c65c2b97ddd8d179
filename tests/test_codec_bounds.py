"""Reading a mailbox file is bounded and total: any bytes give a model or one MailboxFileError."""

from __future__ import annotations

import json

import pytest

from fdcore.contract.codec import MAX_DEPTH, MAX_FILE_BYTES, decode, encode
from fdcore.contract.models import AgentRecord, Request, Status
from fdcore.errors import MailboxFileError

RECORD = {"name": "a1", "updated_at": "2027-01-15T02:00:00Z", "stale_after": 60}
REQUEST = {"id": "r1", "entities": ["t"], "created_at": "2027-01-15T02:00:00Z"}


def _bad(cls: type, data: bytes) -> str:
    with pytest.raises(MailboxFileError) as caught:
        decode(cls, data, "requests/r1.json")
    message = str(caught.value)
    assert message.startswith("requests/r1.json"), message
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"[" * 100_000, "not valid JSON"),
        (b'{"a":' * 40 + b"1" + b"}" * 40, f"nested deeper than {MAX_DEPTH} levels"),
        (b'{"id": "r1", "x": NaN}', "not valid JSON"),
        (b'{"id": "r1", "x": Infinity}', "not valid JSON"),
        (b'{"id": "r1", "x": 1e400}', "number out of range"),
        (b'{"id": "r1", "x": ' + b"9" * 5000 + b"}", "not valid JSON"),
        (b'{"id": "r1", "x": "\\ud800"}', "not valid Unicode"),
        (b'{"\\udfff": 1}', "not valid Unicode"),
        (b'{"id": "r1", "x": "\xed\xa0\x80"}', "not valid Unicode"),  # a surrogate, UTF-8 bytes
        (b'{"id": "r1", "x": [-1e400]}', "number out of range"),
        (b'{"id": "r1", "x": [1e400, }', "not valid JSON"),  # out of range and broken: broken
        (b"\xff\xfe{}", "not valid JSON"),
        (b"", "not valid JSON"),
    ],
)
def test_hostile_bytes_are_one_mailbox_file_error(data: bytes, expected: str) -> None:
    assert expected in _bad(Request, data)


def test_a_file_over_the_size_bound_is_refused_before_parsing() -> None:
    padding = " " * MAX_FILE_BYTES
    data = json.dumps(REQUEST).encode()[:-1] + padding.encode() + b"}"
    assert "over the bound" in _bad(Request, data)


def test_a_file_just_under_the_bounds_is_read() -> None:
    nested: object = 1
    for _ in range(MAX_DEPTH - 2):
        nested = [nested]
    request = decode(Request, json.dumps({**REQUEST, "note": nested}).encode(), "r")
    assert decode(Request, encode(request), "r").extra["note"] == nested


@pytest.mark.parametrize(
    "time", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "1969-12-31T23:59:59Z"]
)
def test_times_out_of_range_are_refused(time: str) -> None:
    message = _bad(Request, json.dumps({**REQUEST, "created_at": time}).encode())
    assert "created_at" in message and "out of range" in message


@pytest.mark.parametrize("stale_after", [1e300, 0, -5, 10 * 365 * 86400 + 1])
def test_an_agent_record_states_a_sane_stale_after(stale_after: float) -> None:
    message = _bad(AgentRecord, json.dumps({**RECORD, "stale_after": stale_after}).encode())
    assert "stale_after" in message


def test_a_status_with_a_huge_attempt_number_reads_and_writes_back() -> None:
    status = {"request": "r1", "state": "running", "updated_at": "2027-01-15T02:00:00Z"}
    big = decode(Status, json.dumps({**status, "attempt": 10**30}).encode(), "s")
    assert decode(Status, encode(big), "s").attempt == 10**30
