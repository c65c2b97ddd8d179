"""Retention: finished requests leave the live folders, findable in the archive, never lost.

The crash test stops a retention run before a random store operation 200 times (and its
recovery run once more) and checks, at every stop, that each request is readable whole in one
place, counted once, and never left with a request but no status (an agent would run it again).
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from fdcore.abc import Blob
from fdcore.agent.retention import RETENTION_LEASE, run_retention
from fdcore.builtin.memory import MemoryStorage
from fdcore.cli.config import load_config
from fdcore.cli.main import ERROR, main
from fdcore.contract.codec import encode
from fdcore.contract.layout import request_key, run_key, status_key
from fdcore.contract.models import (
    Attempt,
    Incident,
    IncidentDocument,
    Outcome,
    Request,
    RunRecord,
    ScheduleRef,
    State,
    Status,
)
from fdcore.environment.queue import queue_rows
from fdcore.errors import ConfigError
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.archive import archived_ids, find_request_files
from fdcore.mailbox.audit import AuditLog
from fdcore.settings.agent_toml import AgentConfig, RetentionConfig, ScheduleConfig
from fdcore.testing.memory_fleet import START, MemoryFleet

pytestmark = pytest.mark.processes

DAY = 86400.0
KEEP = RetentionConfig(keep=DAY, every=3600.0, batch=3)
NOW = START + timedelta(days=10)


def add_finished(
    mailbox: Mailbox,
    request_id: str,
    at: datetime,
    *,
    state: State = State.SUCCEEDED,
    tables: tuple[str, ...] = ("sales", "stock"),
    deadline: datetime | None = None,
    schedule: ScheduleRef | None = None,
) -> None:
    """A request its agent ran: request, status (``state`` at ``at``), one run per table."""
    started = at - timedelta(minutes=5)
    mailbox.create(
        request_key(request_id),
        Request(
            id=request_id,
            entities=list(tables),
            created_at=started,
            deadline=deadline,
            schedule=schedule,
        ),
    )
    outcome = Outcome.RUNNING if not state.final else Outcome.SUCCEEDED
    mailbox.create(
        status_key(request_id),
        Status(
            request=request_id,
            state=state,
            updated_at=at,
            agent="etl-01",
            attempts=[Attempt(1, "etl-01", started, at if state.final else None, outcome)],
            tables_done=list(tables),
        ),
    )
    for table in tables:
        record = RunRecord(request_id, table, "etl-01", 1, 1, started, at, Outcome.SUCCEEDED)
        mailbox.create(run_key(request_id, 1, table), record)


def fresh_mailbox() -> Mailbox:
    return Mailbox(MemoryStorage.fresh(uuid.uuid4().hex))


def live_keys(storage: MemoryStorage) -> list[str]:
    """The live files of requests (the audit trail's events are not theirs)."""
    return [key for key in storage.list() if not key.startswith(("archive/", "audit/"))]


def test_old_finished_requests_move_to_the_archive_and_are_found_there() -> None:
    mailbox = fresh_mailbox()
    add_finished(mailbox, "old-1", START)
    add_finished(mailbox, "old-2", START + timedelta(days=1), state=State.FAILED)
    add_finished(mailbox, "young", NOW - timedelta(hours=2))
    add_finished(mailbox, "running", START, state=State.RUNNING)
    before = find_request_files(mailbox, "old-1")

    tally = run_retention(mailbox, NOW, KEEP, 60.0)

    assert sorted(tally.moved) == ["old-1", "old-2"]
    assert tally.kept == {"younger than keep": 1, "not final": 1}
    assert tally.files == 8  # request, status and two runs each
    assert mailbox.request("old-1") is None and mailbox.status("old-1") is None
    assert list(mailbox.storage.list("runs/old-1/")) == []
    assert mailbox.request("young") is not None and mailbox.request("running") is not None
    found = find_request_files(mailbox, "old-1")
    assert found is not None and before is not None
    assert found.day == "2027/01/15" and found.archived and not before.archived
    assert (found.request, found.status, found.runs) == (before.request, before.status, before.runs)
    assert found.runs and len(found.runs) == 2
    assert list(mailbox.storage.list("archive/2027/01/16/status/")) == [
        "archive/2027/01/16/status/old-2.json"
    ]
    assert list(archived_ids(mailbox)) == ["old-1", "old-2"]
    assert find_request_files(mailbox, "never-was") is None
    # queue --all lists each request once, archived ones with their day
    rows = {row.id: row for row in queue_rows(mailbox, include_archived=True)}
    assert sorted(rows) == ["old-1", "old-2", "running", "young"]
    assert rows["old-2"].archived == "2027/01/16" and rows["old-2"].state == "failed"
    assert rows["young"].archived is None
    assert [row.id for row in queue_rows(mailbox)] == ["running", "young"]


def test_delete_mode_removes_them_and_a_dry_run_changes_nothing() -> None:
    mailbox = fresh_mailbox()
    add_finished(mailbox, "old-1", START)
    keys = list(mailbox.storage.list())
    dry = run_retention(mailbox, NOW, RetentionConfig(keep=DAY, archive=False), 60.0, dry_run=True)
    assert dry.moved == ["old-1"] and list(mailbox.storage.list()) == keys
    run_retention(mailbox, NOW, RetentionConfig(keep=DAY, archive=False), 60.0)
    # what is left is the audit trail's record of the delete, by whom
    [left] = mailbox.storage.list()
    [row] = AuditLog(mailbox).read().rows
    # NOW is a test's time far from the store's: the event is flagged for it, never trusted
    assert row.key == left and row.event is not None and not row.trusted
    assert (row.event.action, row.event.subject, row.event.actor) == (
        "delete",
        "old-1",
        "retention",
    )
    assert find_request_files(mailbox, "old-1") is None


def test_a_slot_request_is_kept_until_its_deadline_has_passed() -> None:
    mailbox = fresh_mailbox()
    slot = ScheduleRef(id="hourly", slot="100")
    deadline = NOW + timedelta(hours=1)
    # Finished long ago (older than keep), but its slot's deadline is still ahead.
    add_finished(mailbox, "sched-hourly-100", START, deadline=deadline, schedule=slot)
    add_finished(mailbox, "sched-nodeadline-1", START, schedule=ScheduleRef(id="x", slot="1"))
    tally = run_retention(mailbox, NOW, KEEP, 60.0)
    assert tally.moved == []
    assert tally.kept == {"deadline not past": 1, "schedule request without deadline": 1}
    # Within grace of the deadline: still kept (another agent's clock may be behind).
    late = deadline + timedelta(seconds=30)
    assert run_retention(mailbox, late, KEEP, 60.0).moved == []
    assert run_retention(mailbox, late + timedelta(seconds=31), KEEP, 60.0).moved == [
        "sched-hourly-100"
    ]


def test_a_request_with_an_open_incident_stays_live() -> None:
    mailbox = fresh_mailbox()
    add_finished(mailbox, "broken", START, state=State.FAILED)
    deadline = START + timedelta(hours=1)
    slot = ScheduleRef("s", "7")
    add_finished(mailbox, "missed", START, state=State.EXPIRED, schedule=slot, deadline=deadline)
    incident = Incident(
        "inc-0001", "request_failed:broken", "Request broken failed", START, "etl-01"
    )
    incident.kind, incident.subject = "request_failed", "broken"
    missed = Incident("inc-0002", "slot_missed:s.7", "missed", START, "etl-01")
    missed.kind, missed.subject = "slot_missed", "s.7"
    mailbox.create("incidents/incidents.json", IncidentDocument(open=[incident, missed]))
    tally = run_retention(mailbox, NOW, KEEP, 60.0)
    assert tally.moved == [] and tally.kept == {"open incident": 2}
    # An unreadable incident document: failed and expired requests stay, others go.
    mailbox.storage.delete("incidents/incidents.json")
    mailbox.storage.create("incidents/incidents.json", b"{not json")
    add_finished(mailbox, "fine", START)
    tally = run_retention(mailbox, NOW, KEEP, 60.0)
    assert tally.moved == ["fine"] and tally.kept == {"incidents unreadable": 2}


# -- crashes -----------------------------------------------------------------------------------


class Crash(BaseException):
    """The process died (SIGKILL): raised before the store operation it interrupts."""


class CrashingStorage:
    """A store whose process dies before its ``crash_at``-th operation."""

    def __init__(self, storage: MemoryStorage, crash_at: int | None) -> None:
        self.storage = storage
        self.url = storage.url
        self.crash_at = crash_at
        self.operations = 0

    def _tick(self) -> None:
        self.operations += 1
        if self.crash_at is not None and self.operations >= self.crash_at:
            raise Crash

    def read(self, key: str) -> Blob | None:
        self._tick()
        return self.storage.read(key)

    def create(self, key: str, data: bytes) -> str:
        self._tick()
        return self.storage.create(key, data)

    def replace(self, key: str, data: bytes, etag: str) -> str:
        self._tick()
        return self.storage.replace(key, data, etag)

    def delete(self, key: str, etag: str | None = None) -> None:
        self._tick()
        self.storage.delete(key, etag)

    def list(self, prefix: str = "") -> Iterator[str]:
        self._tick()
        return self.storage.list(prefix)

    def close(self) -> None:
        self.storage.close()


def build_history(mailbox: Mailbox) -> dict[str, object]:
    """Six old finished requests (one with no runs), one running, one unclaimed, one young."""
    for number in range(6):
        tables = ("sales", "stock", "orders")[: number % 4]
        add_finished(mailbox, f"old-{number}", START + timedelta(hours=number), tables=tables)
    add_finished(mailbox, "running", START, state=State.RUNNING)
    add_finished(mailbox, "young", NOW)
    mailbox.create(request_key("waiting"), Request(id="waiting", entities=["a"], created_at=START))
    return {rid: find_request_files(mailbox, rid) for rid in [*mailbox.request_ids()]}


def check_readable_once(mailbox: Mailbox, originals: dict[str, object]) -> None:
    storage = mailbox.storage
    request_ids = set(mailbox.request_ids())
    status_ids = set(mailbox.status_ids())
    # No request without its status, but the one never claimed: no agent would run one again.
    assert request_ids - status_ids == {"waiting"}
    for request_id, original in originals.items():
        found = find_request_files(mailbox, request_id)
        assert found is not None, f"{request_id} lost"
        assert (found.request, found.status, sorted(found.runs, key=repr)) == (
            original.request,  # type: ignore[attr-defined]
            original.status,  # type: ignore[attr-defined]
            sorted(original.runs, key=repr),  # type: ignore[attr-defined]
        ), request_id
    listed = [row.id for row in queue_rows(mailbox, include_archived=True)]
    assert sorted(listed) == sorted(originals), "a request counted twice or missing"
    assert all(
        key.startswith(("archive/", "requests/", "status/", "runs/", "audit/"))
        for key in storage.list()
    )


def test_a_retention_run_killed_at_200_random_points_loses_nothing() -> None:
    rng = random.Random(12)
    clean = fresh_mailbox()
    build_history(clean)
    counting = CrashingStorage(clean.storage, None)  # type: ignore[arg-type]
    run_retention(Mailbox(counting), NOW, KEEP, 60.0)
    total = counting.operations
    assert total > 50
    for _ in range(200):
        mailbox = fresh_mailbox()
        originals = build_history(mailbox)
        storage = mailbox.storage
        assert isinstance(storage, MemoryStorage)
        crashes = 0
        for crash_at in (rng.randint(1, total), rng.randint(1, total)):  # the run, its rerun
            try:
                run_retention(Mailbox(CrashingStorage(storage, crash_at)), NOW, KEEP, 60.0)
            except Crash:
                crashes += 1
            check_readable_once(mailbox, originals)
        assert crashes >= 1  # the first run always dies: it needs all `total` operations
        run_retention(mailbox, NOW, KEEP, 60.0)  # the next run finishes what was left
        check_readable_once(mailbox, originals)
        assert sorted(live_keys(storage)) == sorted(
            [
                request_key("running"),
                request_key("waiting"),
                request_key("young"),
                status_key("running"),
                status_key("young"),
                *storage.list("runs/running/"),
                *storage.list("runs/young/"),
            ]
        )
        assert list(archived_ids(mailbox)) == [f"old-{n}" for n in range(6)]


# -- in the agent ------------------------------------------------------------------------------


def test_one_agent_per_interval_runs_retention_a_batch_a_poll(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    fleet = fdcore_memory_fleet
    for number in range(7):
        add_finished(fleet.mailbox, f"old-{number}", START - timedelta(days=3))
    settings = RetentionConfig(keep=DAY, every=3600.0, batch=3)
    first = fleet.agent("etl-01", retention=settings, stale_after=60.0, poll_seconds=5.0)
    second = fleet.agent("etl-02", retention=settings, stale_after=60.0, poll_seconds=5.0)
    first.poll()
    second.poll()
    assert len(list(fleet.storage.list("status/"))) == 7  # not in the first minute (warm-up)
    fleet.clock.advance(61)
    polls = []
    for _ in range(4):
        first.poll()
        second.poll()
        polls.append(len(list(fleet.storage.list("status/"))))
        fleet.clock.advance(5)
    assert polls == [4, 1, 0, 0]  # three a poll, by one agent
    assert first.retention.done.examined + second.retention.done.examined == 7
    lease = fleet.mailbox.storage.read(f"leases/{RETENTION_LEASE}.json")
    assert lease is not None
    holder = json.loads(lease.data)["holder"]
    loser = second if holder == "etl-01" else first
    assert loser.retention.done.examined == 0
    # The next interval: one of them looks again (and finds nothing left to move).
    add_finished(fleet.mailbox, "later", START - timedelta(days=3))
    fleet.clock.advance(3600 + 60)
    for _ in range(2):
        first.poll()
        second.poll()
    assert fleet.mailbox.status("later") is None


def test_retention_never_archives_a_slot_early_nor_lets_it_be_created_twice(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    fleet = fdcore_memory_fleet
    hourly = ScheduleConfig(
        id="hourly", entities=("sales",), timing="every", spec="1h", shared=True
    )
    settings = RetentionConfig(keep=60.0, every=60.0, batch=50)
    agents = [
        fleet.agent(
            f"etl-0{n}", schedules=(hourly,), retention=settings, stale_after=30.0, poll_seconds=5
        )
        for n in (1, 2)
    ]
    creates: list[str] = []
    original = fleet.storage.create

    def create(key: str, data: bytes) -> str:
        etag = original(key, data)
        creates.append(key)
        return etag

    fleet.storage.create = create  # type: ignore[method-assign]
    for _ in range(6 * 60):  # six hours, a poll a minute
        for agent in agents:
            agent.poll()
        fleet.finish_runs()
        fleet.clock.advance(60)
        now = fleet.clock.now()
        for request_id in archived_ids(fleet.mailbox):
            found = find_request_files(fleet.mailbox, request_id)
            assert found is not None and found.request is not None
            assert found.request.deadline is not None and found.request.deadline < now
    made = [key for key in creates if key.startswith("requests/sched-hourly-")]
    assert len(made) == len(set(made)) == 6  # each slot's request created once
    assert len(list(archived_ids(fleet.mailbox))) >= 4  # and moved once its deadline passed


# -- settings and the command ------------------------------------------------------------------


HEAD = '[agent]\nname = "a"\nenvironment = "x"\n'


def test_retention_settings_and_their_defaults(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(HEAD)
    assert load_config(path).retention == RetentionConfig()
    assert RetentionConfig().keep == 7 * DAY and RetentionConfig().archive
    path.write_text(
        HEAD + '[retention]\nkeep = "90d"\narchive = false\nevery = "15m"\nbatch = 20\n'
    )
    assert load_config(path).retention == RetentionConfig(
        keep=90 * DAY, archive=False, every=900.0, batch=20
    )
    assert AgentConfig(name="a", environment="x").retention.enabled


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('keep = "7"', "[retention] keep: duration '7': missing unit after 7"),
        ('keep = "0s"', "[retention] keep: must be greater than 0 and at most 10 years, got 0s"),
        ('keep = "4000d"', "[retention] keep: must be greater than 0 and at most 10 years"),
        ("keep = 7", "[retention] keep: 7s is shorter than [incidents] lookback (1d)"),
        ('every = "10s"', "[retention] every: must be at least 1m, got 10s"),
        ("batch = 0", "[retention] batch: must be 1..10000, got 0"),
        ('archive = "yes"', "[retention] archive: expected true (move to archive/) or false"),
        ('kept = "7d"', "[retention] kept: unknown key; did you mean 'keep'?"),
        (
            'keep = "12h"',
            "[retention] keep: 12h is shorter than [incidents] lookback (1d): incidents would",
        ),
    ],
)
def test_bad_retention_settings_are_one_line_naming_file_and_key(
    tmp_path: Path, body: str, expected: str
) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(f"{HEAD}[retention]\n{body}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert expected in str(caught.value)


def test_keep_must_cover_the_incident_objectives(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(
        f'{HEAD}[retention]\nkeep = "2d"\n[[incidents.objectives]]\ntable = "sales"\n'
        'success_rate = 0.9\nwindow = "3d"\n'
    )
    with pytest.raises(ConfigError, match=r"objectives\]\] #1 window \(3d\)"):
        load_config(path)


def test_retention_run_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = str(tmp_path / "env")
    assert main(["init", url]) == 0
    assert main(["submit", "--env", url, "--entities", "sales", "--id", "fresh"]) == 0
    storage_mailbox = Mailbox(_open(url))
    add_finished(storage_mailbox, "old-1", datetime(2020, 1, 2, tzinfo=timezone.utc))
    capsys.readouterr()
    assert main(["retention", "run", "--env", url, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "old-1 would be archived" in out and "1 of 1 requests would be archived" in out
    assert storage_mailbox.request("old-1") is not None
    assert main(["retention", "run", "--env", url, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["moved"] == ["old-1"] and report["files_removed"] == 4
    assert (tmp_path / "env/archive/2020/01/02/requests/old-1.json").is_file()
    assert main(["queue", "--env", url, "--all", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["requests"]
    assert [(row["id"], row["archived"]) for row in rows] == [
        ("old-1", "2020/01/02"),
        ("fresh", None),
    ]
    assert main(["retention", "run", "--env", url, "--keep", "7"]) == ERROR
    assert capsys.readouterr().err == (
        "fdcore: error: fdcore retention run: --keep: duration '7': missing unit after 7 "
        "(use s, m, h, d)\n"
    )
    assert main(["queue", "--env", url, "--all", "--active"]) == ERROR
    capsys.readouterr()
    # An archived request keeps its id: other work under it is refused, the same work (a
    # submission retried after a lost answer) is the archived request, queued nothing again.
    assert main(["submit", "--env", url, "--entities", "sales", "--id", "old-1"]) == ERROR
    assert capsys.readouterr().err == (
        "fdcore: error: request old-1 already exists (archived) with other work "
        "(entities=sales,stock): submit it under another id\n"
    )
    assert main(["submit", "--env", url, "--entities", "sales,stock", "--id", "old-1"]) == 0
    assert capsys.readouterr().out == "old-1\n"
    assert storage_mailbox.request("old-1") is None  # still archived only


def _open(url: str) -> MemoryStorage:
    from fdcore.plugins.manager import load_plugins

    return load_plugins().open_storage(url, create=False)  # type: ignore[return-value]


def test_an_archive_entry_with_a_bad_day_is_a_mailbox_file_error() -> None:
    mailbox = fresh_mailbox()
    mailbox.storage.create(
        "archive/index/x.json",
        encode({"request": "x", "day": "2027-01-15", "archived_at": "2027-01-15T00:00:00Z"}),
    )
    with pytest.raises(Exception, match=r"archive/index/x.json.*day must be YYYY/MM/DD"):
        find_request_files(mailbox, "x")


# -- in the simulator --------------------------------------------------------------------------


def test_the_simulated_fleet_archives_under_crashes_and_store_errors_without_loss() -> None:
    from fdcore.simulator import Scenario, simulate

    report = simulate(
        Scenario(
            seed=7,
            agents=3,
            requests=120,
            take_over=True,
            retention_keep=300.0,
            crash_rate=3.0,
            pause_rate=1.0,
            skew=20.0,
            error_rate=0.05,
            schedules=("every=10m",),
            unshared_schedules=("cron=*/20 * * * *",),
            schedule_hours=3.0,
        )
    )
    # Every invariant: retention's own (archived-whole), the schedules' (no slot created twice),
    # no request succeeding twice, and none stranded on a busy agent.
    assert report.violations == [], report.text()
    assert report.checks["requests archived"] > 100
    assert report.checks["crashes"] > 0


def test_the_poll_history_benchmark_counts_a_flat_poll_with_retention() -> None:
    """benchmarks/poll_history.py's poll_cost, small: what bench-report generators call."""
    import importlib.util

    path = Path(__file__).parents[1] / "benchmarks" / "poll_history.py"
    spec = importlib.util.spec_from_file_location("poll_history", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    empty = bench.poll_cost("localfs", 0, True, polls=14, workers=2)
    kept = bench.poll_cost("localfs", 40, False, polls=14, workers=2)
    archived = bench.poll_cost("localfs", 40, True, polls=14, workers=2)
    assert archived["archive_run"]["moved"] == 40
    # Kept history is listed by every full look, the first poll's and the change signal's safety
    # net alike: requests/ and status/, beyond what an empty environment lists; an idle poll
    # between them reads the signal and lists nothing whatever the history.
    first_listed = kept["first_poll"]["listed_keys"] - empty["first_poll"].get("listed_keys", 0)
    assert first_listed >= 80
    assert kept["listed_keys_per_poll"] == pytest.approx(empty["listed_keys_per_poll"])
    # Archived history costs no poll anything: but the one listing of audit/ by the agent's
    # first retention run (once per process and per keep), which finds the 40 live events of
    # the moves (as an empty environment's first run finds none).
    audit_listing = 40 / 14
    assert archived["listed_keys_per_poll"] - audit_listing == pytest.approx(
        empty["listed_keys_per_poll"]
    )
    assert empty["listed_keys_per_poll"] < 1
    assert archived["operations_per_poll"] == empty["operations_per_poll"]
    uploaded = bench.poll_cost("localfs", 40, True, polls=14, workers=2, archive_locally=True)
    built = uploaded["built_locally"]
    assert built["archive_run"]["moved"] == 40
    # a request, its status, a run, an index entry, and the move's audit event
    assert built["upload"]["files"] == 40 * 5
    assert uploaded["listed_keys_per_poll"] - audit_listing == pytest.approx(
        empty["listed_keys_per_poll"]
    )
    assert uploaded["operations_per_poll"] == empty["operations_per_poll"]


def test_a_batch_stops_after_a_poll_period_on_a_slow_store(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    """On a store where each operation takes 0.5 s (a far tenant), a batch of 100 moves would
    take minutes: the poll carrying it stops after poll_seconds and goes on next poll."""
    fleet = fdcore_memory_fleet
    for number in range(20):
        add_finished(fleet.mailbox, f"old-{number:02d}", START - timedelta(days=3))

    class SlowStore(CrashingStorage):
        def _tick(self) -> None:
            fleet.clock.advance(0.5)

    fleet.wrap_storage(lambda storage: SlowStore(storage, None))
    settings = RetentionConfig(keep=DAY, every=3600.0, batch=100)
    agent = fleet.agent("etl-01", retention=settings, stale_after=60.0, poll_seconds=5.0)
    agent.poll()
    fleet.clock.advance(61)
    looked = []
    for _ in range(4):
        agent.poll()
        looked.append(agent.retention.done.examined)
    assert 1 <= looked[0] <= 2  # ~15 operations a request: 7.5 s of store time each
    assert looked == sorted(looked) and looked[-1] > looked[0]  # on through later polls
