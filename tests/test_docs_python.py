"""docs/python.md: its examples run as written against real agent processes on a local folder, and
its reference says what the code says (as tests/test_hookspecs.py does for docs/plugins.md).

One fleet of real ``fdcore agent run`` processes serves every example of the module; each
example opens the environment ``./fd`` from the fleet's folder, as the page writes it.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import importlib.util
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import attrs
import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

import fdcore
from fdcore import AsyncEnvironment, AsyncRequestHandle, Change, Environment, QueueFilter
from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.environment import FINAL_STATES, AgentRow, QueuePage, QueueRow
from fdcore.errors import RequestFailed

pytestmark = pytest.mark.processes

ROOT = Path(__file__).parents[1]
PAGE = ROOT / "docs" / "python.md"
AGENT = {"poll_seconds": 0.2, "stale_after": 5.0, "concurrency": 2, "shutdown_grace": 5}
# Every table succeeds but one named "broken", which fails with a line of output.
TABLE = (
    "import os, sys\n"
    "if os.environ['FDCORE_TABLE'] == 'broken':\n"
    "    print('bad row 17', file=sys.stderr)\n"
    "    sys.exit(3)\n"
)
TEST_FILES = [
    path
    for pattern in ("tests/**/*.py", "plugins/*/tests/**/*.py", "contrib/*/tests/**/*.py")
    for path in ROOT.glob(pattern)
]


def reference_module() -> ModuleType:
    """docs/python_reference.py, the page's generator (docs/ is not a package)."""
    path = PAGE.parent / "python_reference.py"
    spec = importlib.util.spec_from_file_location("python_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REFERENCE = reference_module()


def examples() -> dict[str, str]:
    """Each ```python block of the page's hand-written part, by the ### heading above it."""
    text = PAGE.read_text().partition(REFERENCE.MARKER)[0]
    found: dict[str, str] = {}
    for heading, body in re.findall(r"^### (.+?)\n(.*?)(?=^##)", text + "\n##", re.M | re.S):
        blocks = re.findall(r"^```python\n(.*?)^```$", body, re.M | re.S)
        assert len(blocks) <= 1, f"docs/python.md: more than one example under {heading!r}"
        if blocks:
            found[heading] = blocks[0]
    return found


EXAMPLES = examples()


def example(heading: str) -> str:
    assert heading in EXAMPLES, f"docs/python.md has no example under '### {heading}'"
    return EXAMPLES[heading]


def run_cell(heading: str) -> dict[str, object]:
    """Run the example in this process, as a notebook would; return its names."""
    namespace: dict[str, object] = {"__name__": "docs_python_example"}
    exec(compile(example(heading), f"docs/python.md: {heading}", "exec"), namespace)
    return namespace


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentFleet]:
    """A real agent on the folder ``fd`` of a fresh folder, the working folder of the tests."""
    folder = tmp_path_factory.mktemp("docs-python")
    fleet = AgentFleet(folder, str(folder / "fd"))
    (folder / "table.py").write_text(TABLE)
    runner = {"kind": "command", "command": [sys.executable, str(folder / "table.py")]}
    fleet.add("etl-01", {"agent": AGENT, "runner": runner}).start()
    yield fleet
    codes = fleet.stop_all()
    fleet.kill_all()
    assert set(codes.values()) == {0}, [agent.output()[-2000:] for agent in fleet]


@pytest.fixture
def in_fleet(fleet: AgentFleet, monkeypatch: pytest.MonkeyPatch) -> AgentFleet:
    """The fleet, with the working folder its ``./fd`` is in."""
    monkeypatch.chdir(fleet.folder)
    return fleet


@pytest.mark.slow
def test_the_notebook_cell_waits_for_both_tables(in_fleet: AgentFleet) -> None:
    story = run_cell("A notebook cell that submits and waits")["story"]
    assert story.state == "succeeded"  # type: ignore[attr-defined]
    assert sorted(run.table for run in story.runs) == ["customers", "sales"]  # type: ignore[attr-defined]


@pytest.mark.slow
def test_the_cron_script_exits_zero_on_success_and_one_with_the_output_on_failure(
    in_fleet: AgentFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    script = in_fleet.folder / "refresh.py"
    script.write_text(example("A script for cron or CI"))
    # As cron runs it, once: a process (each start imports every installed storage plugin).
    command = [sys.executable, str(script), "sales", "broken"]
    failed = subprocess.run(command, cwd=in_fleet.folder, capture_output=True, text=True)
    assert failed.returncode == 1, failed.stderr
    error, *tail = failed.stderr.splitlines()
    assert "failed" in error and "broken" in error
    assert tail == ["--- broken:", "bad row 17"]
    # Its other endings through its main(), whose result is the exit status (sys.exit).
    main = run_cell("A script for cron or CI")["main"]
    assert callable(main)
    assert main(["sales", "customers"]) == 0
    assert capsys.readouterr().out.endswith(": sales, customers refreshed\n")
    os.chdir(in_fleet.folder.parent)  # no environment at ./fd there (monkeypatch restores)
    assert main(["sales"]) == 2
    assert "environment not found" in capsys.readouterr().err


@pytest.mark.slow
def test_the_orchestrator_task_is_retry_safe_and_fails_on_a_failed_request(
    in_fleet: AgentFleet,
) -> None:
    refresh_tables = run_cell("An orchestrator task")["refresh_tables"]
    assert callable(refresh_tables)
    with Environment.open("./fd") as env:
        # The first try submitted, then its worker died before the answer (a lost answer);
        # the orchestrator's retry of the task waits for that request, and runs it once.
        env.submit(["sales"], id="refresh-2026-12-01")
        assert refresh_tables("2026-12-01", ["sales"]) == "refresh-2026-12-01"
        assert refresh_tables("2026-12-01", ["sales"]) == "refresh-2026-12-01"
        story = env.request("refresh-2026-12-01")
        assert [run.table for run in story.runs] == ["sales"] and len(story.attempts) == 1
        changes = env.changes()  # from now on
        with pytest.raises(RequestFailed) as failed:
            refresh_tables("2026-12-02", ["broken"])
        change = next(changes)
    assert isinstance(change, Change) and change.state in FINAL_STATES
    # one look after the request ended: its latest state, new since the last look
    assert (change.request_id, change.previous, change.state) == (
        failed.value.request_id,
        None,
        "failed",
    )
    assert failed.value.request_id == "refresh-2026-12-02"
    assert "\n" not in str(failed.value)


@pytest.mark.slow
def test_the_live_view_prints_a_requests_changes_until_it_succeeded(
    in_fleet: AgentFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    show_changes = run_cell("A live view from `changes()`")["show_changes"]
    assert callable(show_changes)
    stop = threading.Event()
    view = threading.Thread(target=show_changes, args=("./fd", stop))
    view.start()
    try:
        with Environment.open("./fd") as env:
            handle = env.submit(["sales"])
            handle.wait(timeout=30)
        printed: list[str] = []
        final = f"{handle.id}: "
        assert wait_until(
            lambda: printed.append(capsys.readouterr().out) or "-> succeeded" in "".join(printed),
            10,
        ), printed
    finally:
        stop.set()
        view.join(10)
    assert not view.is_alive()  # the event ended the iteration
    lines = [line for line in "".join(printed).splitlines() if final in line]
    assert lines[-1].endswith("-> succeeded"), lines


@pytest.mark.slow
def test_the_web_handler_awaits_without_blocking_the_event_loop(in_fleet: AgentFleet) -> None:
    refresh_handler = run_cell("From an event loop")["refresh_handler"]
    assert callable(refresh_handler)

    async def serve() -> tuple[object, object, int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        done = await refresh_handler(["sales"])
        failed = await refresh_handler(["broken"])
        ticker.cancel()
        return done, failed, ticks

    async def submit() -> AsyncRequestHandle:
        async with await AsyncEnvironment.open("./fd") as env:
            handle = await env.submit(["sales"], id="from-a-coroutine")
            await handle.wait(timeout=30)
            return handle

    handle = asyncio.run(submit())
    assert isinstance(handle, AsyncRequestHandle) and handle.id == "from-a-coroutine"
    done, failed, ticks = asyncio.run(serve())
    assert done[0] == 200 and done[1]["state"] == "succeeded"  # type: ignore[index]
    assert failed[0] == 502 and failed[1]["state"] == "failed"  # type: ignore[index]
    assert ticks > 5  # the loop ran other work while the requests were waited for


@pytest.mark.slow
def test_the_environment_shows_the_fleets_agents_and_queue(in_fleet: AgentFleet) -> None:
    with Environment.open("./fd") as env:
        agents = env.agents()
        page = env.queue(QueueFilter(state="succeeded"), limit=1)
    assert all(isinstance(row, AgentRow) for row in agents)
    assert [(row.name, row.state) for row in agents] == [("etl-01", "live")]
    assert isinstance(page, QueuePage) and page.counts["succeeded"] >= 1
    [row] = page.rows
    assert isinstance(row, QueueRow) and row.state == "succeeded" and row.agent in in_fleet.agents


@pytest.mark.slow
def test_the_examples_type_check_under_mypy_strict(tmp_path: Path) -> None:
    """What users write against the API (the package ships py.typed) passes ``mypy --strict``:
    every name they touch is typed, with no Any leaking into their code."""
    for number, code in enumerate(EXAMPLES.values()):
        (tmp_path / f"example_{number}.py").write_text(code)
    command = [sys.executable, "-m", "mypy", "--strict", str(tmp_path)]
    checked = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_example_is_run_by_a_test() -> None:
    """Each example's heading is one this module's tests run (by name, so -k and xdist agree)."""
    source = Path(__file__).read_text()
    assert [heading for heading in EXAMPLES if f'"{heading}"' not in source] == []
    assert len(EXAMPLES) == 5


# -- the reference ------------------------------------------------------------------------------


def public_names() -> list[tuple[str, str]]:
    return [
        (module, name)
        for module in REFERENCE.MODULES
        for name in importlib.import_module(module).__all__
    ]


def test_the_reference_is_what_the_generator_writes_from_the_code() -> None:
    text = PAGE.read_text()
    assert REFERENCE.page(text) == text, (
        "docs/python.md is out of date: run docs/python_reference.py"
    )


PUBLIC = public_names()


@pytest.mark.parametrize(("module", "name"), PUBLIC, ids=[f"{m}.{n}" for m, n in PUBLIC])
def test_public_name_is_documented_with_its_signature_and_used_by_a_test(
    module: str, name: str
) -> None:
    found, obj = importlib.import_module(module), getattr(importlib.import_module(module), name)
    assert f"### `{REFERENCE.heading(found, name)}`" in PAGE.read_text().splitlines()
    assert REFERENCE.documentation(found, name), f"{module}.{name}: no docstring (or #: comment)"
    if isinstance(obj, type) and obj.__module__.startswith(REFERENCE.PUBLIC_PREFIXES):
        bare = [member for member, doc in REFERENCE.members(obj) if "(" in member and not doc]
        assert not bare, f"{module}.{name}: methods without a docstring: {bare}"
    if module != "fdcore.errors":  # its older names are documented; the new are in fdcore too
        assert used_by_a_test(name) != (name in NOT_USED_BY_A_TEST_YET), name


@functools.cache
def text_of_the_tests() -> str:
    """Every test file's text; this one's without the list below."""
    texts = [path.read_text() for path in TEST_FILES if path != Path(__file__)]
    this = re.sub(r"NOT_USED_BY_A_TEST_YET = \{.*?\}", "", Path(__file__).read_text(), flags=re.S)
    return "\n".join([*texts, this])


def used_by_a_test(name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", text_of_the_tests()) is not None


# Public names no test names yet (tests/test_environment_views.py named the last ones): a test
# naming one takes it off this list (and must: it fails until).
NOT_USED_BY_A_TEST_YET: set[str] = set()


def test_the_public_modules_are_held_to_mypys_strict_flags() -> None:
    """pyproject's override for the public modules sets every flag `mypy --strict` turns on
    per module (``strict`` itself cannot be set per module)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    [public] = [o for o in config["overrides"] if "fdcore.environment" in o["module"]]
    assert set(public["module"]) >= {"fdcore", "fdcore.errors", "fdcore.environment.*"}
    help_text = subprocess.run(
        [sys.executable, "-m", "mypy", "--help"], capture_output=True, text=True, check=True
    ).stdout
    text = re.sub(r"-\n\s+", "-", help_text)  # flags wrapped across lines
    strict = re.search(r"enables the following flags:(.*?)\n  -", text, re.S)
    assert strict, "mypy --help no longer lists the flags of --strict"
    flags = [f.strip().removeprefix("--").replace("-", "_") for f in strict.group(1).split(",")]
    global_only = {"warn_unused_configs", "warn_redundant_casts"}  # mypy: [mypy] section only
    missing = [f for f in flags if f not in global_only and public.get(f) is not True]
    assert not missing, f"pyproject.toml's public-API mypy override lacks {missing}"
    assert os.path.exists(ROOT / "fdcore" / "py.typed")


def test_the_contract_numbers_fdcore_exports_are_those_its_files_carry() -> None:
    from fdcore.contract.models import Request, Status

    assert attrs.fields(Request).contract.default == fdcore.MAILBOX_CONTRACT
    assert attrs.fields(Status).contract.default == fdcore.STATUS_CONTRACT
