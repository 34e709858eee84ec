"""Browser: JupyterLab on 127.0.0.1 driven by Playwright with Debian's chromium.

One server and one browser per module (token auth, everything in a temp dir); each test writes
its own small notebook and opens it in its own JupyterLab workspace, so no earlier notebook
comes back in a hidden tab. It waits until the kernel reports Idle in the status bar, runs the
cells with Ctrl+Enter as a person would, clicks in the rendered widgets, saves a screenshot to
``test-artifacts/``, and checks pixels as well as the DOM. No fixed sleeps: every wait is one
of Playwright's auto-waiting expectations, with generous timeouts for a loaded machine.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from browser_support import CHROMIUM, FLAGS, LabServer, count_green, notebook_json, start_lab

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
SLOW = 90_000  # ms: JupyterLab loading, a kernel starting, widgets rendering on a busy machine
KERNEL = "Python 3 (ipykernel)"


def require_or_skip(reason: str) -> None:
    """Skip with ``reason``, or fail when CI requires every service."""
    if os.environ.get("PI_NOTEBOOK_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason}; PI_NOTEBOOK_REQUIRE_SERVICES=1 requires it", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    if not CHROMIUM.exists():
        require_or_skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        require_or_skip("playwright is not installed")
    server = start_lab(tmp_path_factory.mktemp("lab"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser(lab: LabServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One Chromium (fresh profile) for the module."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("profile")), executable_path=str(CHROMIUM), args=FLAGS,
            headless=True, viewport={"width": 1280, "height": 1000})  # fmt: skip
        context.set_default_timeout(SLOW)
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(browser: Any, lab: LabServer, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh tab; on failure it leaves ``test-artifacts/failed-<test>.png`` behind."""
    page = browser.new_page()
    failed_before = request.session.testsfailed
    try:
        yield page
    finally:
        if request.session.testsfailed > failed_before and not page.is_closed():
            _shot(page, f"failed-{request.node.name}.png")
        page.close()
        lab.shutdown_sessions()  # finished kernels stop competing for the two cores


def _shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)


def _run_cell(page: Any, index: int) -> None:
    """Select cell ``index`` by clicking its editor and run it with Ctrl+Enter."""
    editor = (
        page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
        .nth(index)
        .locator(".jp-InputArea-editor")
    )
    editor.click()
    page.keyboard.press("Control+Enter")


def _open(page: Any, lab: LabServer, name: str, prompt: str) -> Any:
    """Open a notebook with ``%load_ext pi_notebook`` and a ``%%pi`` cell, run both; the run view."""
    from playwright.sync_api import expect

    (lab.root / name).write_text(notebook_json(["%load_ext pi_notebook", f"%%pi\n{prompt}"]))
    workspace = name.removesuffix(".ipynb")
    page.goto(lab.url(f"/lab/workspaces/{workspace}/tree/{name}"))
    panel = page.locator(".jp-NotebookPanel")
    expect(panel).to_have_count(1, timeout=SLOW)  # its own workspace: no other notebook tab
    expect(panel.locator(".jp-Cell")).to_have_count(2, timeout=SLOW)
    # Idle is only shown once the kernel's websocket is connected and it sent a status; a key
    # press before that could run nothing.
    idle = re.compile(rf"{re.escape(KERNEL)} \| Idle")
    expect(page.locator(".jp-StatusBar-Widget", has_text=idle).first).to_be_visible(timeout=SLOW)
    cells = panel.locator(".jp-Cell")
    _run_cell(page, 0)
    expect(cells.nth(0).locator(".jp-OutputArea-output")).to_contain_text(
        "pi_notebook: model", timeout=SLOW
    )
    _run_cell(page, 1)
    run = cells.nth(1).locator(".pi-run")
    expect(run).to_be_visible(timeout=SLOW)
    return run


def _city(lab: LabServer, customer_id: int) -> str:
    with closing(sqlite3.connect(lab.data / "sample.sqlite")) as conn:
        return conn.execute(
            "SELECT city FROM customers WHERE customer_id = ?", (customer_id,)
        ).fetchone()[0]


def test_browser_approve_write(page: Any, lab: LabServer) -> None:
    from playwright.sync_api import expect

    run = _open(
        page,
        lab,
        "approve.ipynb",
        "UPDATE customers SET city = 'Browser-City' WHERE customer_id = 31",
    )
    prompt = run.locator(".pi-approval")
    approve = prompt.get_by_role("button", name="Approve", exact=True)
    reject = prompt.get_by_role("button", name="Reject", exact=True)
    expect(approve).to_be_enabled(timeout=SLOW)
    expect(prompt).to_contain_text("UPDATE customers")
    expect(prompt).to_contain_text("Needs approval because")
    # Pixels, not only the DOM: the prompt is on screen and its Approve button is painted in
    # JupyterLab's green "success" style.
    prompt.scroll_into_view_if_needed()
    green = count_green(prompt.screenshot())
    assert green > 200, f"only {green} green pixels in the approval prompt"
    _shot(page, "approval-prompt.png")
    approve.click()
    expect(run.locator(".pi-tool-card .pi-status")).to_have_text(re.compile("done"), timeout=SLOW)
    expect(approve).to_be_disabled()
    expect(reject).to_be_disabled()
    expect(run.locator(".pi-run-status")).to_contain_text("done")
    _shot(page, "approved.png")
    assert _city(lab, 31) == "Browser-City"


def test_browser_reject_write(page: Any, lab: LabServer) -> None:
    from playwright.sync_api import expect

    run = _open(
        page, lab, "reject.ipynb", "UPDATE customers SET city = 'Never' WHERE customer_id = 32"
    )
    reject = run.locator(".pi-approval").get_by_role("button", name="Reject", exact=True)
    expect(reject).to_be_enabled(timeout=SLOW)
    reject.click()
    expect(run.locator(".pi-tool-card .pi-status")).to_have_text(
        re.compile("blocked"), timeout=SLOW
    )
    expect(run.locator(".pi-error")).to_contain_text("Rejected by user.")
    expect(reject).to_be_disabled()
    _shot(page, "rejected.png")
    assert _city(lab, 32) != "Never"


def test_browser_dataframe_renders(page: Any, lab: LabServer) -> None:
    from playwright.sync_api import expect

    run = _open(
        page,
        lab,
        "read.ipynb",
        "SELECT customer_id, name, city FROM customers ORDER BY customer_id LIMIT 5",
    )
    table = run.locator(".pi-tool-card table.dataframe")
    expect(table).to_be_visible(timeout=SLOW)
    expect(table.locator("tbody tr")).to_have_count(5)
    expect(table.locator("thead")).to_contain_text("customer_id")
    expect(table.locator("tbody tr").first).to_contain_text("1")
    _shot(page, "dataframe.png")


def test_browser_stop_long_query(page: Any, lab: LabServer) -> None:
    from playwright.sync_api import expect

    sql = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) "
        "SELECT COUNT(*) FROM c"
    )  # minutes of work for SQLite unless interrupted
    run = _open(page, lab, "stop.ipynb", sql)
    status = run.locator(".pi-tool-card .pi-status")
    expect(status).to_have_text(re.compile("running"), timeout=SLOW)
    stop = run.locator("button.widget-button", has_text="Stop")
    started = time.monotonic()
    stop.click()
    expect(run.locator(".pi-run-status")).to_contain_text("stopped", timeout=30_000)
    expect(status).to_have_text(re.compile("error"), timeout=30_000)
    elapsed = time.monotonic() - started
    assert elapsed < 20, f"Stop took {elapsed:.1f} s to end the query"
    expect(run.locator(".pi-error")).to_contain_text("cancelled")
    expect(stop).to_be_disabled()
    _shot(page, "stopped.png")
