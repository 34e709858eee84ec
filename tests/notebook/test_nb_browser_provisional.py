"""Browser: a kernel restarted while a prompt waits, seen in JupyterLab with Debian's chromium.

The live view of the stopped run says so and offers no buttons; the provisional record shows
below it; saved, the kernel shut down and the file reopened, the cell shows the provisional
record (the prompt, the SQL, ``awaiting approval``, ``interrupted: nothing ran after this
point``) and no widget error. Screenshots, light and dark, go to the test's tmp dir.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from browser_support import LabServer
from test_nb_browser import SLOW, _open, browser, lab, page  # noqa: F401 (fixtures)

from pi_notebook.notebook.provisional import INTERRUPTED

pytestmark = pytest.mark.browser

SQL = "UPDATE customers SET city = 'Never-Saved' WHERE customer_id = 27"


def _theme(tab: Any, name: str) -> None:
    from playwright.sync_api import expect

    tab.evaluate(
        f"window.jupyterapp.commands.execute('apputils:change-theme', {{theme: '{name}'}})"
    )
    light = "true" if name.endswith("Light") else "false"
    expect(tab.locator(f"body[data-jp-theme-light='{light}']")).to_have_count(1, timeout=SLOW)
    expect(tab.locator("#jupyterlab-splash")).to_have_count(0, timeout=SLOW)


def _shots(tab: Any, cell: Any, tmp: Path, name: str) -> None:
    cell.screenshot(path=str(tmp / f"{name}-light.png"))
    _theme(tab, "JupyterLab Dark")
    cell.screenshot(path=str(tmp / f"{name}-dark.png"))
    _theme(tab, "JupyterLab Light")


def test_browser_restart_during_a_prompt_then_reopened(
    page: Any,  # noqa: F811
    lab: LabServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    cell = _open(page, lab, "provisional.ipynb", SQL)
    approve = cell.locator(".pi-approval").get_by_role("button", name="Approve", exact=True)
    expect(approve).to_be_enabled(timeout=SLOW)
    expect(cell.locator(".pi-provisional")).to_be_hidden()  # the live view is the one shown
    expect(cell.locator(".pi-stale")).to_be_hidden()

    # Not awaited: the command resolves only once its dialog is answered.
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:restart-kernel'); }")
    page.locator(".jp-Dialog .jp-mod-accept").click()
    stale = cell.locator(".pi-run .pi-stale")
    expect(stale).to_be_visible(timeout=SLOW)
    expect(stale).to_contain_text("This run's kernel stopped: nothing ran after this point.")
    expect(cell.get_by_role("button", name="Approve", exact=True)).to_be_hidden()
    expect(cell.get_by_role("button", name="Stop")).to_be_hidden()
    provisional = cell.locator(".pi-provisional")
    expect(provisional).to_be_visible()
    expect(provisional).to_contain_text(INTERRUPTED)
    expect(provisional.locator(".pi-card .pi-status")).to_have_text("awaiting approval")
    _shots(page, cell, tmp_path, "restarted")

    page.keyboard.press("Control+s")
    expect(page.locator(".jp-mod-dirty")).to_have_count(0, timeout=SLOW)
    saved = json.loads((lab.root / "provisional.ipynb").read_text())
    outputs = saved["cells"][1]["outputs"]
    (stamped,) = [o for o in outputs if "pi_notebook" in o.get("metadata", {})]
    assert stamped["metadata"]["pi_notebook"]["provisional"] is True
    assert INTERRUPTED in "".join(stamped["data"]["text/plain"])

    lab.shutdown_sessions()
    page.goto(lab.url("/lab/workspaces/provisional-reopened/tree/provisional.ipynb"))
    panel = page.locator(".jp-NotebookPanel")
    expect(panel).to_have_count(1, timeout=SLOW)
    cell = panel.locator(".jp-CodeCell").nth(1)
    provisional = cell.locator(".pi-provisional")
    expect(provisional).to_be_visible(timeout=SLOW)
    expect(provisional).to_contain_text(INTERRUPTED)
    expect(provisional).to_contain_text(re.compile(r"Prompt:\s*UPDATE customers SET city"))
    expect(provisional.locator(".pi-card pre.pi-sql")).to_have_text(SQL)
    expect(provisional.locator(".pi-card .pi-status")).to_have_text("awaiting approval")
    # Once the kernel is up its widget manager knows the view's model is gone for good.
    idle = re.compile(r"Python 3 \(ipykernel\) \| Idle")
    expect(page.locator(".jp-StatusBar-Widget", has_text=idle).first).to_be_visible(timeout=SLOW)
    expect(cell.get_by_text("Error displaying widget")).to_be_hidden()
    expect(cell.get_by_text("Loading widget")).to_be_hidden()
    lab.shutdown_sessions()  # reopened with the kernel shut down
    _shots(page, cell, tmp_path, "reopened")
