"""Four-eyes review on a real JupyterHub: ana asks in a ``%%pi`` cell, bo approves with
``%pi_review`` in his own server, both driven through Chromium.

The hub runs on 127.0.0.1 (free ports) with the ``dummy`` authenticator, the simple local
spawner and the npm proxy (see ``hub_support.py``); each user's kernel knows its user from
``JUPYTERHUB_USER`` only. Both notebooks point at one SQLite review store, which is also the
shared audit, and at one data database. Each person logs in through the hub's form in their own
browser context (their own cookies), opens a notebook and runs its cells with Ctrl+Enter. The
proof is on both screens (ana's card says whom it waits for, then who approved; bo's card says
he approved), in the data (the row changed) and in the audit (requester ana, approver bo).
Screenshots of both sides go to the test's temp dir and ``test-artifacts/`` (and with
``PI_NOTEBOOK_UPDATE_DOC_IMAGES=1`` to ``docs/images/``).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from browser_support import CHROMIUM, FLAGS, notebook_json
from hub_support import PASSWORD, Hub, find_proxy, start_hub

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
DOC_IMAGES = ROOT / "docs" / "images"
SLOW = 90_000  # ms: a server spawning, JupyterLab loading and a kernel starting on 2 busy cores
KERNEL_IDLE = re.compile(r"Python 3 \(ipykernel\) \| Idle")
UPDATE = "UPDATE customers SET city = 'Hub-City' WHERE customer_id = 7"


def require_or_skip(reason: str) -> None:
    """Skip with ``reason``, or fail when CI requires every service."""
    if os.environ.get("PI_NOTEBOOK_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason}; PI_NOTEBOOK_REQUIRE_SERVICES=1 requires it", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def proxy() -> str:
    if importlib.util.find_spec("jupyterhub") is None:
        require_or_skip("jupyterhub is not installed (pip install -e '.[dev]')")
    found = find_proxy()
    if found is None:
        require_or_skip("configurable-http-proxy is not installed (.ci/run installs it from npm)")
    if not CHROMIUM.exists():
        require_or_skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    if importlib.util.find_spec("playwright") is None:
        require_or_skip("playwright is not installed")
    assert found is not None
    return found


@pytest.fixture
def hub(proxy: str, tmp_path: Path) -> Iterator[Hub]:
    server = start_hub(tmp_path / "hub", ("ana", "bo"), proxy=proxy)
    try:
        yield server
    finally:
        server.stop()


def _setup_cell(data: str, store: str) -> str:
    review = {"url": store, "reviewers": ["bo"], "timeout_s": 300, "poll_s": 0.25}
    return "\n".join(
        [  # the settings first: the session is built once, with them
            f"%config PiNotebook.database_url = {data!r}",
            f"%config PiNotebook.audit_url = {store!r}",
            f"%config PiNotebook.review = {review!r}",
            "%load_ext pi_notebook",
        ]
    )


def _shot(locator: Any, tmp: Path, name: str, *, doc: bool = False) -> None:
    """A screenshot in the test's temp dir and test-artifacts/; ``doc`` ones also replace the
    copy in docs/images/ with PI_NOTEBOOK_UPDATE_DOC_IMAGES=1 (a test run never dirties the
    checkout)."""
    ARTIFACTS.mkdir(exist_ok=True)
    locator.screenshot(path=str(tmp / name))
    (ARTIFACTS / name).write_bytes((tmp / name).read_bytes())
    if doc and os.environ.get("PI_NOTEBOOK_UPDATE_DOC_IMAGES") == "1":
        DOC_IMAGES.mkdir(parents=True, exist_ok=True)
        (DOC_IMAGES / name).write_bytes((tmp / name).read_bytes())


def _login(page: Any, hub: Hub, user: str) -> None:
    """Log in through the hub's form, as a person does; returns once the hub answered."""
    from playwright.sync_api import expect

    page.goto(f"{hub.base}/hub/login")
    page.locator("#username_input").fill(user)
    page.locator("#password_input").fill(PASSWORD)
    page.locator("#login_submit").click()
    expect(page).not_to_have_url(re.compile(r"/hub/login"), timeout=SLOW)


def _goto(page: Any, hub: Hub, user: str, name: str) -> None:
    """Start opening ``name`` in ``user``'s JupyterLab (returns while it loads)."""
    page.goto(f"{hub.base}/user/{user}/lab/tree/{name}", wait_until="commit")


def _opened(page: Any) -> Any:
    """Wait until the notebook :func:`_goto` opens is shown and its kernel is idle; its cells."""
    from playwright.sync_api import expect

    panel = page.locator(".jp-NotebookPanel")
    expect(panel).to_have_count(1, timeout=SLOW)
    expect(page.locator(".jp-StatusBar-Widget", has_text=KERNEL_IDLE).first).to_be_visible(
        timeout=SLOW
    )
    return panel.locator(".jp-CodeCell")


def _run(page: Any, cells: Any, index: int) -> None:
    """Run cell ``index`` with Ctrl+Enter. The first run after Lab opens sometimes does
    nothing (the prompt stays ``[ ]``): then once more."""
    from playwright.sync_api import expect

    cell = cells.nth(index)
    prompt = cell.locator(".jp-InputPrompt")
    for attempt in range(2):
        cell.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Control+Enter")
        try:
            expect(prompt).not_to_have_text(re.compile(r"\[ \]"), timeout=10_000)
            return
        except AssertionError:
            if attempt:
                raise


def test_hub_ana_asks_bo_approves_with_pi_review(hub: Hub, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    from pi_notebook.approvals import approvals_dataframe
    from pi_notebook.audit import AuditLog
    from pi_notebook.sample_db import create_sample_database

    started = time.monotonic()
    hub.spawn("ana")  # both servers start while Chromium opens and the users log in
    hub.spawn("bo")
    shared = tmp_path / "team"
    shared.mkdir()
    data, store = f"sqlite:///{shared / 'data.sqlite'}", f"sqlite:///{shared / 'review.db'}"
    create_sample_database(data)
    setup = _setup_cell(data, store)
    (hub.homes / "ana" / "ask.ipynb").write_text(notebook_json([setup, f"%%pi\n{UPDATE}"]))
    (hub.homes / "bo" / "review.ipynb").write_text(notebook_json([setup, "%pi_review"]))
    timings: dict[str, float] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS, headless=True)
        try:
            ana_ctx, bo_ctx = (
                browser.new_context(viewport={"width": 1200, "height": 900}) for _ in range(2)
            )
            for ctx in (ana_ctx, bo_ctx):
                ctx.set_default_timeout(SLOW)
            ana, bo = ana_ctx.new_page(), bo_ctx.new_page()
            _login(ana, hub, "ana")
            _login(bo, hub, "bo")
            hub.wait_ready("ana")
            hub.wait_ready("bo")
            timings["servers up"] = time.monotonic() - started

            # Both open their notebooks (bo's Lab loads while ana works).
            _goto(ana, hub, "ana", "ask.ipynb")
            _goto(bo, hub, "bo", "review.ipynb")

            # ana asks: her write waits for bo, and her card says so.
            ana_cells = _opened(ana)
            _run(ana, ana_cells, 0)
            expect(ana_cells.nth(0).locator(".jp-OutputArea-output")).to_contain_text(
                "pi_notebook: model", timeout=SLOW
            )
            _run(ana, ana_cells, 1)
            asking = ana_cells.nth(1)
            waiting = asking.locator(".pi-tool-card")
            expect(waiting.locator(".pi-review-wait")).to_contain_text(
                "Waiting for a review by bo", timeout=SLOW
            )
            expect(waiting.locator(".pi-status")).to_contain_text("awaiting approval")
            expect(asking.locator(".pi-approval")).to_have_count(0)  # not hers to approve
            timings["ana waiting"] = time.monotonic() - started
            _shot(asking, tmp_path, "hub-review-requester-waiting.png", doc=True)

            # bo, in his own server, reviews: one card, from ana, with the statement.
            bo_cells = _opened(bo)
            _run(bo, bo_cells, 0)
            expect(bo_cells.nth(0).locator(".jp-OutputArea-output")).to_contain_text(
                "pi_notebook: model", timeout=SLOW
            )
            _run(bo, bo_cells, 1)
            card = bo_cells.nth(1).locator(".pi-review-card")
            expect(card).to_have_count(1, timeout=SLOW)
            expect(card).to_contain_text("ana asks for a review: query_database")
            expect(card.locator("pre.pi-sql")).to_have_text(UPDATE)
            expect(card).to_contain_text("Needs approval because")
            expect(card).to_contain_text("Would change 1 row")
            expect(bo_cells.nth(1)).to_contain_text("you decide as bo")
            approve = card.get_by_role("button", name="Approve", exact=True)
            expect(approve).to_be_enabled()
            _shot(bo_cells.nth(1), tmp_path, "hub-review-reviewer.png", doc=True)
            approve.click()
            expect(card).to_contain_text("Approved by bo", timeout=SLOW)
            expect(card.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
            _shot(bo_cells.nth(1), tmp_path, "hub-review-reviewer-approved.png")

            # ana's card: approved by bo, one row changed; the run is done.
            record = ana_cells.nth(1).locator(".pi-record")
            expect(record.locator(".pi-card .pi-status")).to_contain_text(
                re.compile(r"approved by bo · 1 row changed"), timeout=SLOW
            )
            expect(record.locator(".pi-run-status")).to_contain_text("done")
            expect(record).to_contain_text("approved by bo")
            timings["ana approved"] = time.monotonic() - started
            _shot(ana_cells.nth(1), tmp_path, "hub-review-requester.png", doc=True)
        finally:
            browser.close()

    with closing(sqlite3.connect(shared / "data.sqlite")) as conn:
        city = conn.execute("SELECT city FROM customers WHERE customer_id = 7").fetchone()[0]
    assert city == "Hub-City"
    log = AuditLog(store)
    try:
        row = approvals_dataframe(log).iloc[-1]
        assert (row.decision, row.requester, row.approver, row.user) == (
            "approved",
            "ana",
            "bo",
            "ana",
        )
        reviews: Any = log.to_dataframe(kind="review")
        steps = [(p["event"], u) for p, u in zip(reviews.payload, reviews.user, strict=True)]
        assert ("posted", "ana") in steps and ("decision", "bo") in steps
        assert log.verify().ok  # one hash chain over both people's records
    finally:
        log.close()
    print(" ".join(f"{k}: {v:.1f} s" for k, v in timings.items()))  # measured, not asserted
