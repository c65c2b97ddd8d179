"""The monitor page in a real browser: Playwright driving Debian's chromium, against
``fdcore monitor`` as a process over a local environment with three real agents.

Skipped, with the reason, where chromium or Playwright is missing (``make setup`` installs
chromium as root on Debian, as CI runs). A screenshot of each page is saved under
``test-artifacts/monitor/`` (printed).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fdcore.cli.fleet import AgentFleet
from fdcore.mailbox.submit import submit

pytestmark = pytest.mark.processes

CHROMIUM = "/usr/bin/chromium"
if shutil.which(CHROMIUM) is None:
    pytest.skip(
        f"{CHROMIUM} is missing: make setup installs it (root on Debian)", allow_module_level=True
    )
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
expect = sync_api.expect

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts" / "monitor"
AGENT = {"poll_seconds": 0.2, "stale_after": 5, "concurrency": 1, "shutdown_grace": 10}
RUNNER = {"kind": "python", "function": "fdcore.testing.tables:write_table"}
SCHEDULES = [{"id": "hourly", "shared": True, "entities": ["summary"], "every": "1h"}]
TABLES = ["t1", "t2", "t3", "t4", "t5"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots of the monitor's pages: {ARTIFACTS}")
    return ARTIFACTS


def not_reloaded(page: Any) -> None:
    """The page is the one loaded before: what changed came in place (no reload, no navigation)."""
    assert page.evaluate("window.notReloaded") is True
    assert int(page.get_attribute("#live", "data-updates") or 0) >= 1  # swapped in at least once


@pytest.mark.slow
def test_the_pages_show_the_fleet_live_and_cancel_needs_the_token(
    fdcore_fleet: AgentFleet, browser: Any, artifacts: Path, start_monitor: Any
) -> None:
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
    fleet.env["FDCORE_TEST_TABLE_SECONDS"] = "0.8"
    fleet.env["FDCORE_TEST_TABLE_MIN_SECONDS"] = "0.6"
    for n in range(3):
        sections = {"agent": AGENT, "pipeline": {"claim": "when_free"}, "runner": RUNNER}
        fleet.add(f"etl-{n}", {**sections, "schedules": SCHEDULES})
    # 9 requests of 5 tables of ~0.7 s for 3 agents of one worker: ~10 s of work
    for n in range(9):
        submit(mailbox, TABLES, request_id=f"r{n}", created_by="test")
    monitor = start_monitor(
        "--env", fleet.environment, "--allow-actions", "--refresh", "0.5", "--by", "ann"
    )
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.on("dialog", lambda dialog: dialog.accept())
    # what the browser refused (the page's own Content-Security-Policy, a failed asset)
    errors: list[str] = []
    page.on(
        "console", lambda message: errors.append(message.text) if message.type == "error" else None
    )
    try:
        # the agents start after the page is open: it shows them as they come
        page.goto(f"{monitor.url}?token={monitor.token}")
        assert "token" not in page.url  # taken out of the address bar, kept for this tab
        page.evaluate("window.notReloaded = true")
        for agent in fleet:
            agent.start()
        expect(page.locator("#agents .badge.state-live")).to_have_count(3, timeout=20000)
        assert page.locator("#agents tr[data-agent]").count() == 3
        not_reloaded(page)
        page.screenshot(path=str(artifacts / "agents.png"), full_page=True)

        # the queue: r0 runs, then succeeds, in place
        page.goto(f"{monitor.url}queue")
        page.evaluate("window.notReloaded = true")
        page.wait_for_selector('#queue tr[data-request="r0"][data-state="succeeded"]')
        not_reloaded(page)
        page.screenshot(path=str(artifacts / "queue.png"), full_page=True)
        page.select_option("form.filters select[name=state]", "waiting")  # filters at once
        page.wait_for_url("**/queue?state=waiting&schedule=&agent=&q=")
        states = page.locator("#queue tr[data-request]").evaluate_all(
            "rows => rows.map(row => row.dataset.state)"
        )
        assert states and set(states) == {"waiting"}, states

        # a finished request's cost: its runs' store operations, as the agents counted them
        page.goto(f"{monitor.url}requests/r0")
        counted = page.inner_text("#cost-operations")
        assert int(counted.split()[0]) >= 2 * len(TABLES), counted  # each run's record, lease
        per_run = page.locator("#runs td.store-ops").all_inner_texts()
        assert sum(map(int, per_run)) == int(counted.split()[0]), per_run  # they add up
        assert page.inner_text("#cost-total").startswith("$")

        # a request not finished yet: its timeline grows a block as each table ends
        for request in ("r4", "r5", "r6", "r7"):
            page.goto(f"{monitor.url}requests/{request}")
            if page.inner_text("#request-state") in ("waiting", "accepted", "running"):
                break
        page.evaluate("window.notReloaded = true")
        blocks = page.locator("svg.timeline g.run")
        page.locator("svg.timeline g.run").nth(blocks.count()).wait_for(timeout=20000)
        not_reloaded(page)
        assert page.locator("svg.timeline g.lane").count() >= 1
        # its axis in round steps: 1, 2 or 5 times a power of ten of one unit
        labels = page.locator("svg.timeline text.axis").all_text_contents()
        assert labels[0] == "0 s" and len(labels) >= 3, labels
        assert re.fullmatch(r"\+((0\.0*)?[125]0*) (s|min|h)", labels[1]), labels
        page.screenshot(path=str(artifacts / "request.png"), full_page=True)

        # a cancel without the token (another tab, not opened with ?token=) is refused: 403
        stranger = browser.new_page()
        stranger.on("dialog", lambda dialog: dialog.accept())
        stranger.goto(f"{monitor.url}requests/r8")
        with stranger.expect_response(lambda r: r.url.endswith("/cancel")) as refused:
            stranger.click("button.action >> text=Cancel")
        assert refused.value.status == 403
        stranger.wait_for_selector("#notice.failed >> text=Refused (HTTP 403)")
        assert mailbox.cancel("r8") is None
        stranger.close()

        # with the token: r8 ends cancelled, and says by whom
        page.goto(f"{monitor.url}requests/r8")
        page.evaluate("window.notReloaded = true")
        with page.expect_response(lambda r: r.url.endswith("/cancel")) as accepted:
            page.click("button.action >> text=Cancel")
        assert accepted.value.status == 200
        page.wait_for_selector("#notice.done >> text=cancelled by ann")
        page.wait_for_selector("#request-state.state-cancelled", timeout=20000)
        assert page.inner_text("#cancelled-by").startswith("by ann at ")
        not_reloaded(page)
        cancel = mailbox.cancel("r8")
        assert cancel is not None and cancel.value.by == "ann"
        page.screenshot(path=str(artifacts / "request-cancelled.png"), full_page=True)

        page.goto(f"{monitor.url}schedules")
        expect(page.locator('#schedules tr[data-schedule="hourly"]')).to_have_count(1)
        page.screenshot(path=str(artifacts / "schedules.png"), full_page=True)
        page.goto(f"{monitor.url}incidents")
        page.screenshot(path=str(artifacts / "incidents.png"), full_page=True)

        # on a phone: the page fits the screen's width (wide tables scroll in their box)
        phone = browser.new_page(viewport={"width": 390, "height": 844}, is_mobile=True)
        for path, name in (("", "agents"), ("queue", "queue"), ("requests/r0", "request")):
            phone.goto(f"{monitor.url}{path}")
            width = phone.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, (name, width)
            phone.screenshot(path=str(artifacts / f"phone-{name}.png"), full_page=True)
        phone.close()
        assert errors == []
    finally:
        page.close()


@pytest.mark.slow
def test_the_queue_pages_and_filters_on_the_server(
    history: Any, browser: Any, artifacts: Path, start_monitor: Any
) -> None:
    """Over 206 requests: a page of the newest 100, the next page, a filter by id text and by
    agent, each read by the monitor (the page holds only the rows it shows) and kept by the
    live refresh."""
    for n in range(200):
        submit(history.mailbox, ["a"], request_id=f"bulk-{n:03d}", created_by="test")
    monitor = start_monitor("--env", history.url, "--refresh", "0.3")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    rows = page.locator("#queue tr[data-request]")
    try:
        page.goto(f"{monitor.url}queue")
        expect(rows).to_have_count(100)
        assert rows.first.get_attribute("data-request") == "bulk-199"  # the newest first
        assert page.get_attribute("#queue-meta", "data-matching") == "206"
        assert page.inner_text("a[data-count=waiting] b") == "202"
        page.click("a[rel=next]")
        page.wait_for_url("**/queue?*page=2")
        assert rows.first.get_attribute("data-request") == "bulk-099"
        page.click("a[rel=next]")
        expect(rows).to_have_count(6)  # the oldest six: the history's own requests
        page.screenshot(path=str(artifacts / "queue-page-3.png"), full_page=True)

        page.goto(f"{monitor.url}queue")
        page.fill("form.filters input[name=q]", "bulk-15")
        page.press("form.filters input[name=q]", "Enter")
        page.wait_for_url("**/queue?*q=bulk-15*")
        expect(rows).to_have_count(10)
        page.evaluate("window.notReloaded = true")
        expect(page.locator("#live")).to_have_attribute("data-updates", re.compile(r"^[2-9]|\d\d"))
        not_reloaded(page)  # the live refresh keeps the filter
        expect(rows).to_have_count(10)
        ids = rows.evaluate_all("rows => rows.map(row => row.dataset.request)")
        assert ids == [f"bulk-{n}" for n in range(159, 149, -1)], ids

        page.goto(f"{monitor.url}queue")
        page.select_option("form.filters select[name=agent]", "etl-lost")  # filters at once
        page.wait_for_url("**/queue?*agent=etl-lost*")
        ids = rows.evaluate_all("rows => rows.map(row => row.dataset.request)")
        assert sorted(ids) == ["bad1", "ok1"], ids
        page.screenshot(path=str(artifacts / "queue-filtered.png"), full_page=True)
    finally:
        page.close()
