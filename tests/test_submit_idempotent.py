"""Submitting with an id is idempotent: the same work under an id that exists is the request
that is there (live or archived), other work under it is a one-line refusal, and a submission
retried after a lost answer queues one request, on a real local folder."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
from fdcore_localfs.store import LocalFolderStorage

from fdcore.cli.main import ERROR, main
from fdcore.contract.layout import request_key
from fdcore.contract.models import Request
from fdcore.errors import RequestError, StorageUnavailable
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.submit import submit, work_differences

FIRST = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
LATER = datetime(2026, 12, 1, 9, 5, tzinfo=timezone.utc)
DEADLINE = datetime(2026, 12, 2, tzinfo=timezone.utc)


class LostAnswer(LocalFolderStorage):
    """A folder whose next create writes the file, then fails as a dropped connection would:
    the caller cannot tell whether its request was queued."""

    lose_next = False

    def create(self, key: str, data: bytes) -> str:
        etag = super().create(key, data)
        if self.lose_next:
            self.lose_next = False
            raise StorageUnavailable(key, "connection reset before the answer")
        return etag


def requests_in(folder: Path) -> list[str]:
    return sorted(path.name for path in (folder / "requests").iterdir())


def test_the_same_work_under_a_taken_id_is_the_request_there(tmp_path: Path) -> None:
    mailbox = Mailbox(LocalFolderStorage(tmp_path / "env", create=True))
    first = submit(
        mailbox, ["sales", "stock"], request_id="nightly-1", deadline=DEADLINE, now=FIRST
    )
    again = submit(
        mailbox, ["sales", "stock"], request_id="nightly-1", deadline=DEADLINE, now=LATER
    )
    assert again == first and again.created_at == FIRST
    assert requests_in(tmp_path / "env") == ["nightly-1.json"]


@pytest.mark.parametrize(
    ("tables", "deadline", "attempts", "difference"),
    [
        (["stock", "sales"], DEADLINE, None, "entities=sales,stock"),
        (["sales", "stock"], None, None, "deadline=2026-12-02T00:00:00.000Z"),
        (["sales", "stock"], DEADLINE, 2, "max_attempts=None"),
    ],
)
def test_other_work_under_a_taken_id_is_refused_in_one_line(
    tmp_path: Path,
    tables: list[str],
    deadline: datetime | None,
    attempts: int | None,
    difference: str,
) -> None:
    mailbox = Mailbox(LocalFolderStorage(tmp_path / "env", create=True))
    submit(mailbox, ["sales", "stock"], request_id="nightly-1", deadline=DEADLINE, now=FIRST)
    with pytest.raises(RequestError) as refused:
        submit(mailbox, tables, request_id="nightly-1", deadline=deadline, max_attempts=attempts)
    assert str(refused.value) == (
        f"request nightly-1 already exists with other work ({difference}): "
        "submit it under another id"
    )
    stored = mailbox.request("nightly-1")
    assert stored is not None and stored.value.entities == ["sales", "stock"]


def test_a_submission_retried_after_a_lost_answer_queues_one_request(tmp_path: Path) -> None:
    storage = LostAnswer(tmp_path / "env", create=True)
    mailbox = Mailbox(storage)
    storage.lose_next = True
    with pytest.raises(StorageUnavailable):
        submit(mailbox, ["sales"], request_id="from-airflow-42", now=FIRST)
    again = submit(mailbox, ["sales"], request_id="from-airflow-42", now=LATER)
    assert again.created_at == FIRST  # the request the lost answer was about
    assert requests_in(tmp_path / "env") == ["from-airflow-42.json"]


def test_a_request_created_between_the_look_and_the_create_decides(tmp_path: Path) -> None:
    """Two submitters racing with one id: the loser's create-if-absent fails, and it answers
    with what the winner wrote (or refuses, if that is other work)."""

    class RacedBy(LocalFolderStorage):
        def create(self, key: str, data: bytes) -> str:
            if key == request_key("race-1") and not (tmp_path / "env" / key).exists():
                winner = Request(id="race-1", entities=["sales"], created_at=FIRST)
                Mailbox(LocalFolderStorage(tmp_path / "env")).create(key, winner)
            return super().create(key, data)

    mailbox = Mailbox(RacedBy(tmp_path / "env", create=True))
    assert submit(mailbox, ["sales"], request_id="race-1", now=LATER).created_at == FIRST
    with pytest.raises(RequestError, match="race-1 already exists with other work"):
        submit(mailbox, ["stock"], request_id="race-1")


def test_work_differences_ignore_who_and_when() -> None:
    one = Request(id="a", entities=["x"], created_at=FIRST, created_by="notebook")
    other = Request(id="a", entities=["x"], created_at=LATER, created_by="fdcore submit")
    assert work_differences(one, other) == []


def test_fdcore_submit_with_a_taken_id_prints_the_request_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command as a scheduler runs it: the same --id twice exits 0 both times with one
    request queued; other tables under that id exit with the one-line refusal."""
    url = str(tmp_path / "env")
    assert main(["init", url]) == 0
    capsys.readouterr()
    for _ in range(2):
        assert main(["submit", "--env", url, "--entities", "sales", "--id", "cron-7"]) == 0
        assert capsys.readouterr() == ("cron-7\n", "")
    assert requests_in(tmp_path / "env") == ["cron-7.json"]
    assert main(["submit", "--env", url, "--entities", "stock", "--id", "cron-7"]) == ERROR
    assert capsys.readouterr().err == (
        "fdcore: error: request cron-7 already exists with other work (entities=sales): "
        "submit it under another id\n"
    )
