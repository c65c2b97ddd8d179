"""Retention and the operator's surface together: a request's cancel and retry link move to the
archive with it, and ``show``, ``cancel`` and ``retry`` find an archived request."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from fdcore.builtin.memory import MemoryStorage
from fdcore.contract.models import Cancel
from fdcore.environment.views import request_story
from fdcore.errors import RequestError
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.archive import archive_files, find_request_files
from fdcore.mailbox.cancel import cancel_request
from fdcore.mailbox.submit import retry_request, submit

LONG_AGO = datetime(2020, 1, 2, tzinfo=timezone.utc)
NOW = datetime(2027, 1, 15, tzinfo=timezone.utc)


def cancelled_long_ago(mailbox: Mailbox, request_id: str) -> None:
    """An unclaimed request an operator cancelled in 2020 (ended by the cancel itself)."""
    submit(mailbox, ["sales", "stock"], request_id=request_id, now=LONG_AGO)
    cancel_request(mailbox, request_id, by="ann", reason="wrong day", now=LONG_AGO)


def test_a_cancel_and_a_retry_link_move_with_their_request() -> None:
    mailbox = Mailbox(MemoryStorage.fresh("archive-operator"))
    cancelled_long_ago(mailbox, "r1")
    again = retry_request(mailbox, "r1", by="ann", now=LONG_AGO + timedelta(minutes=1))
    removed = archive_files(mailbox, "r1", "2020/01/02", True, NOW)
    assert removed == 4  # request, status, cancel, retry link
    assert mailbox.cancel("r1") is None and mailbox.retry("r1") is None
    files = find_request_files(mailbox, "r1")
    assert files is not None and files.archived
    assert files.cancel == Cancel(request="r1", by="ann", at=LONG_AGO, reason="wrong day")
    assert files.retry is not None and files.retry.retry == again.id
    story = request_story(mailbox, "r1")
    assert (story.state, story.archived, story.retried_as) == ("cancelled", "2020/01/02", again.id)
    assert story.why is not None and "cancelled by ann" in story.why


def test_an_archived_request_cannot_be_cancelled_and_is_retried_once() -> None:
    mailbox = Mailbox(MemoryStorage.fresh("archive-operator-2"))
    cancelled_long_ago(mailbox, "r1")
    archive_files(mailbox, "r1", "2020/01/02", True, NOW)
    with pytest.raises(RequestError, match="request r1 already ended cancelled; nothing to cancel"):
        cancel_request(mailbox, "r1", by="bob", reason=None, now=NOW)
    assert mailbox.status("r1") is None  # nothing written live for it
    again = retry_request(mailbox, "r1", by="bob", now=NOW)
    assert again.retry_of == "r1" and again.entities == ["sales", "stock"]
    with pytest.raises(RequestError, match=f"already retried as {again.id}"):
        retry_request(mailbox, "r1", by="bob", now=NOW)
    assert mailbox.request(again.id) is not None  # the retry is live, waiting to be claimed
