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
APPROVED_ONE_ROW = re.compile(r"approved by \S+ · 1 row changed")
"""A write's card: the word, who approved it (the person at the keyboard), the rows."""
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
            str(tmp_path_factory.mktemp("profile")),
            executable_path=str(CHROMIUM),
            args=FLAGS,
            headless=True,
            viewport={"width": 1280, "height": 1000},
        )
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
        page.locator(".jp-NotebookPanel .jp-Notebook .jp-CodeCell")
        .nth(index)
        .locator(".jp-InputArea-editor")
    )
    editor.click()
    page.keyboard.press("Control+Enter")


def _open(
    page: Any, lab: LabServer, name: str, prompt: str, more: tuple[str, ...] = (), setup: str = ""
) -> Any:
    """Open a notebook with ``%load_ext pi_notebook`` (and the lines ``setup``), a ``%%pi``
    cell and the cells ``more``; run the first two; the run view."""
    from playwright.sync_api import expect

    sources = ["%load_ext pi_notebook" + (f"\n{setup}" if setup else ""), f"%%pi\n{prompt}", *more]
    (lab.root / name).write_text(notebook_json(sources))
    workspace = name.removesuffix(".ipynb")
    page.goto(lab.url(f"/lab/workspaces/{workspace}/tree/{name}"))
    panel = page.locator(".jp-NotebookPanel")
    expect(panel).to_have_count(1, timeout=SLOW)  # its own workspace: no other notebook tab
    expect(panel.locator(".jp-Cell")).to_have_count(len(sources), timeout=SLOW)
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
    cell = cells.nth(1)
    expect(cell.locator(".pi-run, .pi-record").first).to_be_visible(timeout=SLOW)
    return cell


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
    expect(reject).to_be_enabled()
    expect(prompt.locator("textarea")).to_have_value(re.compile("UPDATE customers SET city"))
    expect(prompt).to_contain_text("Needs approval because")
    expect(prompt).to_contain_text("Would change 1 row")
    # Pixels, not only the DOM: the prompt is on screen and its Approve button is painted in
    # JupyterLab's green "success" style.
    prompt.scroll_into_view_if_needed()
    green = count_green(prompt.screenshot())
    assert green > 200, f"only {green} green pixels in the approval prompt"
    _shot(page, "approval-prompt.png")
    approve.click()
    # The cell was busy until the click; then its record replaced the live view.
    record = page.locator(".jp-NotebookPanel .jp-Cell").nth(1).locator(".pi-record")
    expect(record).to_be_visible(timeout=SLOW)
    expect(record.locator(".pi-card .pi-status")).to_contain_text(APPROVED_ONE_ROW)
    expect(record.locator(".pi-run-status")).to_contain_text("done")
    expect(record.locator("pre.pi-sql")).to_contain_text("Browser-City")
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
    record = page.locator(".jp-NotebookPanel .jp-Cell").nth(1).locator(".pi-record")
    expect(record.locator(".pi-card .pi-status")).to_contain_text("rejected", timeout=SLOW)
    expect(record.locator(".pi-run-status")).to_contain_text("blocked")
    _shot(page, "rejected.png")
    assert _city(lab, 32) != "Never"


def test_browser_edit_the_sql_then_approve(page: Any, lab: LabServer) -> None:
    """The person fixes the statement in the prompt, then approves: the edit is what runs."""
    from playwright.sync_api import expect

    run = _open(
        page, lab, "edit.ipynb", "UPDATE customers SET city = 'Typo-City' WHERE customer_id = 33"
    )
    prompt = run.locator(".pi-approval")
    approve = prompt.get_by_role("button", name="Approve", exact=True)
    expect(approve).to_be_enabled(timeout=SLOW)
    editor = prompt.locator("textarea")
    editor.fill("UPDATE customers SET city = 'Fixed-City' WHERE customer_id = 33")
    editor.blur()  # the widget's value syncs to the kernel on blur/continuous update
    approve.click()
    record = page.locator(".jp-NotebookPanel .jp-Cell").nth(1).locator(".pi-record")
    expect(record.locator(".pi-card .pi-status")).to_contain_text(APPROVED_ONE_ROW, timeout=SLOW)
    # The card's SQL is the edit (what ran); what the model asked for is kept below it.
    expect(record.locator("pre.pi-sql").first).to_contain_text("Fixed-City")
    expect(record.locator(".pi-edited")).to_contain_text("the model asked for")
    expect(record.locator("pre.pi-sql").nth(1)).to_contain_text("Typo-City")
    _shot(page, "edited.png")
    assert _city(lab, 33) == "Fixed-City"


def test_browser_grant_a_scope_then_a_later_write_runs_without_asking(
    page: Any, lab: LabServer
) -> None:
    """Grant instead of Approve: the statement runs, the next one inside the scope runs without
    a prompt (its card says granted), and %pi_grants lists the grant with its use."""
    from playwright.sync_api import expect

    run = _open(
        page,
        lab,
        "grant.ipynb",
        "UPDATE customers SET city = 'Grant-One' WHERE customer_id = 34",
        more=("%%pi\nUPDATE customers SET city = 'Grant-Two' WHERE customer_id = 35", "%pi_grants"),
    )
    form = run.locator(".pi-approval")
    grant = form.get_by_role("button", name="Grant", exact=True)
    expect(grant).to_be_enabled(timeout=SLOW)
    _shot(page, "grant-form.png")
    grant.click()
    cells = page.locator(".jp-NotebookPanel .jp-Cell")
    expect(cells.nth(1).locator(".pi-record .pi-card .pi-status")).to_contain_text(
        "1 row changed", timeout=SLOW
    )
    _run_cell(page, 2)
    second = cells.nth(2).locator(".pi-record")
    expect(second.locator(".pi-card .pi-status")).to_contain_text("granted", timeout=SLOW)
    expect(cells.nth(2).locator(".pi-approval")).to_have_count(0)
    _run_cell(page, 3)
    listing = cells.nth(3).locator(".jp-OutputArea-output")
    expect(listing).to_contain_text("UPDATE", timeout=SLOW)
    expect(listing).to_contain_text("customers")
    _shot(page, "granted.png")
    assert (_city(lab, 34), _city(lab, 35)) == ("Grant-One", "Grant-Two")
    # The saved file says the same, and the audit agrees with it call by call.
    page.keyboard.press("Control+s")
    expect(page.locator(".jp-mod-dirty")).to_have_count(0, timeout=SLOW)
    first, second = _saved_records(lab, "grant.ipynb")
    assert re.search(r"approved by \S+ · granted scope g-\S+ \(UPDATE customers", first)
    assert re.search(r"granted \(g-\S+\)", second) and "approved" not in second
    _verified(lab, "grant.ipynb", calls=2)


def test_browser_dataframe_renders(page: Any, lab: LabServer) -> None:
    from playwright.sync_api import expect

    _open(
        page,
        lab,
        "read.ipynb",
        "SELECT customer_id, name, city FROM customers ORDER BY customer_id LIMIT 5",
    )
    table = page.locator(".jp-NotebookPanel .jp-Cell").nth(1).locator(".pi-record table.pi-table")
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
    record = page.locator(".jp-NotebookPanel .jp-Cell").nth(1).locator(".pi-record")
    expect(record.locator(".pi-run-status")).to_contain_text("stopped", timeout=30_000)
    expect(record.locator(".pi-card .pi-status")).to_contain_text("aborted")
    elapsed = time.monotonic() - started
    assert elapsed < 20, f"Stop took {elapsed:.1f} s to end the query"
    expect(record.locator(".pi-error")).to_contain_text("cancelled")
    _shot(page, "stopped.png")


QUICKSTART = Path(__file__).resolve().parents[2] / "notebooks" / "quickstart.ipynb"
DOC_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"


def _doc_shot(locator: Any, name: str) -> None:
    """A screenshot the README shows, in test-artifacts/; with PI_NOTEBOOK_UPDATE_DOC_IMAGES=1
    it also replaces the copy in docs/images/ (a test run never dirties the checkout)."""
    ARTIFACTS.mkdir(exist_ok=True)
    locator.screenshot(path=str(ARTIFACTS / name))
    if os.environ.get("PI_NOTEBOOK_UPDATE_DOC_IMAGES") == "1":
        DOC_IMAGES.mkdir(parents=True, exist_ok=True)
        (DOC_IMAGES / name).write_bytes((ARTIFACTS / name).read_bytes())


def _idle(page: Any) -> None:
    from playwright.sync_api import expect

    idle = re.compile(rf"{re.escape(KERNEL)} \| Idle")
    expect(page.locator(".jp-StatusBar-Widget", has_text=idle).first).to_be_visible(timeout=SLOW)


def test_browser_quickstart_walked_by_a_person_then_reopened(page: Any, lab: LabServer) -> None:
    """A person runs the quickstart cell by cell, clicks Approve instead of letting the
    scripted cell approve, runs the next cell (which must not raise), saves, closes, shuts the
    kernel down and reopens: every %%pi output is its record, no widget error."""
    import json

    from playwright.sync_api import expect

    (lab.root / "quickstart.ipynb").write_text(QUICKSTART.read_text())
    page.goto(lab.url("/lab/workspaces/quickstart/tree/quickstart.ipynb"))
    panel = page.locator(".jp-NotebookPanel")
    expect(panel).to_have_count(1, timeout=SLOW)
    _idle(page)
    code = panel.locator(".jp-CodeCell")
    _run_cell(page, 0)  # %load_ext
    expect(code.nth(0).locator(".jp-OutputArea-output")).to_contain_text(
        "pi_notebook: model", timeout=SLOW
    )
    _run_cell(page, 1)  # the read: busy until done, then its record
    read = code.nth(1).locator(".pi-record")
    expect(read).to_be_visible(timeout=SLOW)
    expect(read.locator("table.pi-table")).to_contain_text("status")
    _run_cell(page, 2)  # %pi_result: nothing to wait for
    expect(code.nth(2).locator(".jp-OutputArea-output")).to_contain_text("orders")
    _run_cell(page, 3)  # a plot of the result DataFrame (matplotlib comes with `make lab`)
    expect(code.nth(3).locator(".jp-OutputArea-output img")).to_have_count(1, timeout=SLOW)
    _run_cell(page, 4)  # the write (--background): a person clicks Approve in its card
    approve = code.nth(4).locator(".pi-approval").get_by_role("button", name="Approve", exact=True)
    expect(approve).to_be_enabled(timeout=SLOW)
    expect(code.nth(4).locator(".pi-approval textarea")).to_have_value(
        re.compile("UPDATE customers")
    )
    expect(code.nth(4).locator(".pi-approval")).to_contain_text("Would change 1 row")
    _doc_shot(code.nth(4), "approval-prompt.png")
    approve.click()
    expect(code.nth(4).locator(".pi-record .pi-card .pi-status")).to_contain_text(
        APPROVED_ONE_ROW, timeout=SLOW
    )
    _run_cell(page, 5)  # the cell written for unattended runs still works after the click
    output = code.nth(5).locator(".jp-OutputArea-output")
    expect(output).to_contain_text("done approved", timeout=SLOW)
    expect(
        code.nth(5).locator(".jp-RenderedText[data-mime-type='application/vnd.jupyter.stderr']")
    ).to_have_count(0)
    assert _city(lab, 1) == "Oslo"
    # Save, close, shut the kernel down, reopen.
    page.keyboard.press("Control+s")
    expect(page.locator(".jp-mod-dirty")).to_have_count(0, timeout=SLOW)
    saved = json.loads((lab.root / "quickstart.ipynb").read_text())
    stamped = [
        o
        for c in saved["cells"]
        for o in c.get("outputs", [])
        if "pi_notebook" in o.get("metadata", {})
    ]
    assert len(stamped) == 2 and all("text/html" in o["data"] for o in stamped)
    lab.shutdown_sessions()
    page.goto(lab.url("/lab/workspaces/quickstart-reopened/tree/quickstart.ipynb"))
    panel = page.locator(".jp-NotebookPanel")
    expect(panel).to_have_count(1, timeout=SLOW)
    code = panel.locator(".jp-CodeCell")
    record = code.nth(1).locator(".pi-record")
    expect(record).to_be_visible(timeout=SLOW)
    expect(record).to_contain_text("SELECT status, COUNT(*) AS orders")
    expect(record.locator(".pi-card .pi-status")).to_contain_text("allowed")
    expect(panel).not_to_contain_text("Error displaying widget")
    expect(panel).not_to_contain_text("model not found")
    expect(code.nth(4).locator(".pi-record")).to_contain_text(APPROVED_ONE_ROW)
    _doc_shot(code.nth(1), "record-reopened.png")
    _doc_shot(code.nth(4), "record-write-reopened.png")
    # The dark theme: the record takes JupyterLab's colours.
    page.evaluate(
        "window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})"
    )
    expect(page.locator("body[data-jp-theme-light='false']")).to_have_count(1, timeout=SLOW)
    # JupyterLab shows its splash while the theme loads: the screenshot waits for it to go.
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=SLOW)
    background = record.locator(".pi-card").first.evaluate(
        "e => getComputedStyle(e).backgroundColor"
    )
    colour = record.locator(".pi-card").first.evaluate("e => getComputedStyle(e).color")
    assert _luma(background) < 80 < _luma(colour), (background, colour)
    _doc_shot(code.nth(1), "record-dark.png")
    page.evaluate(
        "window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})"
    )
    expect(page.locator("body[data-jp-theme-light='true']")).to_have_count(1, timeout=SLOW)


def _luma(css: str) -> float:
    r, g, b = (float(v) for v in re.findall(r"[\d.]+", css)[:3])
    return 0.299 * r + 0.587 * g + 0.114 * b


def _saved_records(lab: LabServer, name: str) -> list[str]:
    """The text form of each stamped record in the saved file, in order."""
    import json

    saved = json.loads((lab.root / name).read_text())
    return [
        "".join(o["data"]["text/plain"])
        for c in saved["cells"]
        for o in c.get("outputs", [])
        if "pi_notebook" in o.get("metadata", {})
    ]


def _verified(lab: LabServer, name: str, *, calls: int) -> None:
    """``verify_notebook`` of the saved file against the lab's audit store passes."""
    from pi_notebook.audit import AuditLog, verify_notebook

    with AuditLog(f"sqlite:///{lab.data / 'audit.sqlite'}") as log:
        report = verify_notebook(lab.root / name, log)
    assert report.ok and report.calls == calls, report.problems


NUMBERS = {
    "sqlite": (
        "SELECT 70131.16 AS revenue, 1234567.89 AS amount, 0.125 AS share, 1e-7 AS tiny, "
        "12345678901234 AS big, 10001 AS customer_id",
        ["70,131.16", "1,234,567.89", "0.125", "1e-07", "12,345,678,901,234", "10001"],
    ),
    "postgres": (
        "SELECT 70131.16::float8 AS revenue, 1234567.89::numeric AS amount, "
        "0.125::float8 AS share, 1e-7::float8 AS tiny, 12345678901234::bigint AS big, "
        "70131.10::numeric(12,2) AS price",
        ["70,131.16", "1,234,567.89", "0.125", "1e-07", "12,345,678,901,234", "70,131.10"],
    ),
}
"""Per engine: a read, and the exact strings its row shows (the numeric keeps its scale)."""


@pytest.mark.parametrize("engine", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_browser_numbers_are_exact_in_the_card_and_the_saved_record(
    page: Any, lab: LabServer, engine: str, request: pytest.FixtureRequest
) -> None:
    """Money keeps its cents and big numbers their digits, on screen and in the saved file."""
    from playwright.sync_api import expect

    sql, shown = NUMBERS[engine]
    setup = f"%pi_connect {request.getfixturevalue('pg_url')}" if engine == "postgres" else ""
    name = f"numbers-{engine}.ipynb"
    run = _open(page, lab, name, sql, setup=setup)
    row = run.locator(".pi-record table.pi-table tbody tr").first
    expect(row).to_be_visible(timeout=SLOW)
    assert [c.strip() for c in row.locator("td").all_inner_texts()][-len(shown) :] == shown
    _shot(page, f"numbers-{engine}.png")
    page.keyboard.press("Control+s")
    expect(page.locator(".jp-mod-dirty")).to_have_count(0, timeout=SLOW)
    (record,) = _saved_records(lab, name)
    assert " ".join(shown) in " ".join(record.split())
    for rounded in ("70,131.2", "1,234,568", "1.235e+13"):
        assert rounded not in record
    _verified(lab, name, calls=1)
