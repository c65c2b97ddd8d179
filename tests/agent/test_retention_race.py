"""Retention racing an agent, interleaved at the store: a moved request is never claimed again,
its archived history never replaced, and its last table's lease is free once it is moved.

Each test runs one retention move (the code ``fdcore retention run`` runs) at the exact store
call of the agent where the race of issue 24 item 1 put it: between the two listings of a look,
or just before the create that claims. Luck plays no part.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

from agent_parts_helpers import Environment, attempt

from fdcore.agent.retention import run_retention
from fdcore.contract.codec import encode
from fdcore.contract.layout import archive_index_key, archived_key, run_key, status_key
from fdcore.contract.models import Cancel, Outcome, RunRecord, State, Status
from fdcore.mailbox.archive import find_request_files
from fdcore.mailbox.cancel import end_unheld
from fdcore.settings.agent_toml import RetentionConfig
from fdcore.testing.memory_fleet import START

KEEP = RetentionConfig(keep=1.0)
LATER = START + timedelta(minutes=10)


def succeeded(request_id: str, agent: str = "etl-02", at: datetime = START) -> Status:
    """The final status of a request ``agent`` ran, in its first attempt."""
    done = attempt(1, agent, at)
    done.outcome, done.ended_at = Outcome.SUCCEEDED, at
    return Status(
        request=request_id,
        state=State.SUCCEEDED,
        agent=agent,
        updated_at=at,
        attempts=[done],
        tables_done=["sales"],
    )


def retention_now(env: Environment) -> None:
    """A whole retention run, as ``fdcore retention run --keep 1s --grace 0`` makes it."""
    tally = run_retention(env.mailbox, LATER, KEEP, 0.0)
    assert tally.moved and not tally.problems


def before_call(env: Environment, name: str, when: Callable[[str], bool], do: Callable[[], None]):
    """Run ``do`` once, just before the first call of ``name`` whose key ``when`` accepts
    (``list`` hooks run after it, between it and the agent's next call; ``list`` stands for
    any listing, ``list_versions`` and ``list_changes`` included, as the mailbox index lists
    with versions, or only what changed, where the store offers it)."""
    listings = ("list", "list_versions", "list_changes")
    names = [n for n in listings if hasattr(env.storage, n)] if name == "list" else [name]
    done = False

    def hook(method: str) -> Callable[..., object]:
        inner = getattr(env.storage, method)

        def hooked(key: str, *args: object) -> object:
            nonlocal done
            if done or not when(key):
                return inner(key, *args)
            done = True
            if method not in listings:
                do()
                return inner(key, *args)
            if method == "list_changes":  # what changed: an answer, not an iterator
                answer = inner(key, *args)
                do()
                return answer
            listed: Iterator[object] = iter(list(inner(key, *args)))
            do()
            return listed

        return hooked

    for method in names:
        setattr(env.storage, method, hook(method))


def archived_status(env: Environment, request_id: str) -> bytes:
    files = find_request_files(env.mailbox, request_id)
    assert files is not None and files.archived and files.day is not None
    blob = env.storage.read(archived_key(files.day, status_key(request_id)))
    assert blob is not None
    return blob.data


def finished_and_moved_before_its_first_status(env: Environment, request_id: str) -> Status:
    """Before this process's create of ``request_id``'s first status lands, another agent runs
    it to the end and retention moves it: the create then finds no status in the way. The
    final status the other agent wrote."""
    final = succeeded(request_id)
    key = status_key(request_id)

    def finish_and_move() -> None:
        env.mailbox.create(key, final)
        retention_now(env)

    before_call(env, "create", lambda written: written == key, finish_and_move)
    return final


def test_a_request_moved_between_an_agents_two_listings_is_not_claimed_again(
    env: Environment,
) -> None:
    # The agent claimed r1 once (it remembers the request) and another process finished it.
    env.submit("r1", "sales")
    discovery, held = env.discovery(env.config(claim="always"))
    discovery.look_for_work(START)
    assert list(held.work) == ["r1"]
    held.work.clear()
    env.write_status(succeeded("r1", agent="etl-01"))
    final = encode(succeeded("r1", agent="etl-01"))
    # The move lands right after the agent's first listing of the look, whichever it lists first.
    first_listing = ("requests/", "status/")
    before_call(env, "list", lambda prefix: prefix in first_listing, lambda: retention_now(env))
    discovery.look_for_work(LATER)
    assert held.work == {}, "a succeeded request was claimed again"
    assert env.mailbox.status("r1") is None  # nothing left live ...
    assert archived_status(env, "r1") == final  # ... and the history as it was


def test_a_claim_landing_after_the_move_is_withdrawn(env: Environment) -> None:
    # The agent lists r1 unclaimed; before its claim lands, another agent runs it to the end
    # and retention moves it: the claim's create then finds no status in the way.
    env.submit("r1", "sales")
    final = finished_and_moved_before_its_first_status(env, "r1")
    discovery, held = env.discovery(env.config(claim="always"))
    discovery.look_for_work(LATER)
    assert held.work == {}, "an archived request was claimed again"
    assert env.mailbox.status("r1") is None  # the claim withdrawn: no stray live status
    assert archived_status(env, "r1") == encode(final)


def test_an_expiry_landing_after_the_move_is_withdrawn(env: Environment) -> None:
    env.submit("r1", "sales", deadline=START + timedelta(minutes=1))
    final = finished_and_moved_before_its_first_status(env, "r1")
    discovery, _ = env.discovery(env.config())
    discovery.look_for_work(LATER)  # past the deadline: it expires the request it saw unclaimed
    assert env.mailbox.status("r1") is None
    assert archived_status(env, "r1") == encode(final)
    # A retention run later finds nothing live to move over the archived history.
    assert run_retention(env.mailbox, LATER, KEEP, 0.0).moved == []


def test_an_archived_copy_is_never_replaced_and_the_conflict_is_reported(
    env: Environment,
) -> None:
    env.submit("r1", "sales")
    final = succeeded("r1")
    env.mailbox.create(status_key("r1"), final)
    retention_now(env)
    # A live status of r1 appears again (as a resurrected run left one before the fix).
    again = succeeded("r1", agent="etl-03", at=START + timedelta(minutes=1))
    env.mailbox.create(status_key("r1"), again)
    tally = run_retention(env.mailbox, LATER, KEEP, 0.0)
    assert tally.moved == [] and len(tally.problems) == 1
    assert "archived copy differs" in tally.problems[0]
    assert archived_status(env, "r1") == encode(final)  # the history stands
    assert env.mailbox.status("r1") is not None  # the live leftover stays for an operator


def test_a_moved_requests_final_status_still_frees_its_last_tables_lease(
    env: Environment,
) -> None:
    # etl-02 ran r1's last table under the lease and finished it: the finish frees the lease
    # (docs/takeover.md), with no release of its own. Retention then moves r1 away.
    env.submit("r1", "sales")
    held = env.leases.acquire("sales", "etl-02", "r1", 1, 3600.0, START)
    assert held is not None
    env.mailbox.create(status_key("r1"), succeeded("r1", at=START + timedelta(seconds=1)))
    retention_now(env)
    # The next request on the table takes the lease at once, not an hour (and a grace) later.
    taken = env.leases.acquire("sales", "etl-01", "r2", 1, 60.0, LATER, grace=60.0)
    assert taken is not None and taken.lease.generation == held.lease.generation + 1


def test_a_lease_whose_request_is_archived_by_another_attempt_is_not_freed(
    env: Environment,
) -> None:
    # Fencing stays safe: a status final in another attempt (the holder lost its request and
    # may still run the table) frees nothing, archived or not.
    env.submit("r1", "sales")
    assert env.leases.acquire("sales", "etl-02", "r1", 1, 3600.0, START) is not None
    other = succeeded("r1", agent="etl-03")
    other.attempt = 2
    env.mailbox.create(status_key("r1"), other)
    retention_now(env)
    assert env.leases.acquire("sales", "etl-01", "r2", 1, 60.0, LATER, grace=60.0) is None


def late_record(request_id: str, table: str) -> RunRecord:
    """The run record of a table whose status change landed first (a record still owed)."""
    return RunRecord(request_id, table, "etl-02", 1, 1, START, START, Outcome.SUCCEEDED)


def live_runs(env: Environment) -> list[str]:
    return list(env.storage.list("runs/"))


def test_a_run_record_landing_during_the_move_moves_with_it(env: Environment) -> None:
    env.submit("r1", "sales")
    env.mailbox.create(status_key("r1"), succeeded("r1"))
    key = run_key("r1", 1, "sales")
    # The owed record lands after the move listed runs/r1/, before its index entry.
    before_call(
        env,
        "create",
        lambda created: created == archive_index_key("r1"),
        lambda: env.mailbox.create(key, late_record("r1", "sales")),
    )
    retention_now(env)
    files = find_request_files(env.mailbox, "r1")
    assert files is not None and [r.table for r in files.runs] == ["sales"]
    assert live_runs(env) == []


def test_a_run_record_owed_past_the_move_follows_its_request_into_the_archive(
    env: Environment,
) -> None:
    env.submit("r1", "sales")
    env.mailbox.create(status_key("r1"), succeeded("r1"))
    retention_now(env)
    tables, _, _ = env.tables(env.config("etl-02"))
    tables.unwritten[run_key("r1", 1, "sales")] = late_record("r1", "sales")
    tables.write_unwritten()  # a later poll writes the record a store error kept back
    files = find_request_files(env.mailbox, "r1")
    assert files is not None and [r.table for r in files.runs] == ["sales"]
    assert live_runs(env) == [] and tables.unwritten == {}


def test_an_operators_cancel_landing_after_the_move_is_withdrawn(env: Environment) -> None:
    # `fdcore cancel` (and an agent honouring a cancel) ends an unclaimed request by creating
    # its status: the same confirmed create as a claim.
    env.submit("r1", "sales")
    final = finished_and_moved_before_its_first_status(env, "r1")
    cancel = Cancel(request="r1", by="ops", at=LATER)
    assert end_unheld(env.mailbox, cancel, LATER) is None
    assert env.mailbox.status("r1") is None
    assert archived_status(env, "r1") == encode(final)
