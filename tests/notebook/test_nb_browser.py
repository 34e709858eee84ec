"""Browser: JupyterLab on 127.0.0.1 driven by Playwright with Debian's chromium.

One server per module (token auth, a temp root dir); each test opens its own small notebook,
runs it with Shift+Enter as a person would, clicks in the rendered widgets, saves a screenshot
to ``test-artifacts/``, and checks pixels as well as the DOM.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import sqlite3
import struct
import subprocess
import sys
import time
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB(A) PNG into rows of raw pixel bytes (enough for screenshots)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * channels, [], bytearray(width * channels)
    for y in range(height):
        filt, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if filt == 1:
                line[i] = (line[i] + a) & 255
            elif filt == 2:
                line[i] = (line[i] + b) & 255
            elif filt == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif filt == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, channels, rows


def require_or_skip(reason: str) -> None:
    """Skip with ``reason``, or fail when CI requires every service."""
    if os.environ.get("PI_NOTEBOOK_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason}; PI_NOTEBOOK_REQUIRE_SERVICES=1 requires it", pytrace=False)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    if not CHROMIUM.exists():
        require_or_skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    root = tmp_path_factory.mktemp("lab_root")
    data = tmp_path_factory.mktemp("lab_data")
    for notebook in (REPO / "notebooks").glob("*.ipynb"):
        shutil.copy(notebook, root / notebook.name)
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "PI_NOTEBOOK_DATA_DIR": str(data), "JUPYTER_CONFIG_DIR": str(root / ".jupyter")}
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--ip=127.0.0.1", f"--port={port}", "--no-browser",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--ServerApp.port_retries=0",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         "--LabApp.extension_manager=readonly", *(["--allow-root"] if os.geteuid() == 0 else [])],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                pytest.fail("JupyterLab did not start")
            time.sleep(0.3)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("profile")), executable_path=str(CHROMIUM), args=FLAGS,
            headless=True, viewport={"width": 1280, "height": 1000})  # fmt: skip
        try:
            yield {"base": base, "token": token, "root": root, "data": data, "context": browser}
        finally:
            browser.close()
            server.terminate()
            server.wait(timeout=20)


def _open(lab: dict[str, Any], name: str, cells: list[str]) -> Any:
    notebook = {"cells": [{"cell_type": "code", "source": s, "metadata": {}, "outputs": [],
                           "execution_count": None} for s in cells],
                "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
                "nbformat": 4, "nbformat_minor": 5}  # fmt: skip
    (lab["root"] / name).write_text(json.dumps(notebook))
    page = lab["context"].new_page()
    page.goto(f"{lab['base']}/lab/tree/{name}?token={lab['token']}")
    # Earlier tests' notebooks come back from the saved workspace in hidden tabs, hence :visible.
    page.get_by_text("| Idle").wait_for(timeout=60_000)
    loaded = page.locator(".jp-OutputArea-output:visible", has_text="pi_notebook: model")
    for _attempt in range(4):  # a key press that lands before the kernel is connected is lost
        page.locator(".jp-NotebookPanel:visible .jp-Cell").first.click()
        page.keyboard.press("Control+Enter")
        try:
            loaded.first.wait_for(timeout=15_000)
            break
        except Exception:
            continue
    for index in range(1, len(cells)):
        page.locator(".jp-NotebookPanel:visible .jp-Cell").nth(index).click()
        page.keyboard.press("Control+Enter")
    try:
        page.wait_for_selector(".pi-run:visible", timeout=60_000)
    except Exception:
        _shot(page, f"failed-{name}.png")
        raise
    return page


def _shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)


def _city(lab: dict[str, Any], customer_id: int) -> str:
    with sqlite3.connect(lab["data"] / "sample.sqlite") as conn:
        return conn.execute("SELECT city FROM customers WHERE customer_id = ?", (customer_id,)).fetchone()[0]


def test_browser_approve_write(lab: dict[str, Any]) -> None:
    page = _open(lab, "approve.ipynb", ["%load_ext pi_notebook",
                                        "%%pi\nUPDATE customers SET city = 'Browser-City' WHERE customer_id = 31"])
    prompt = page.locator(".pi-approval:visible")
    prompt.wait_for(timeout=60_000)
    assert "UPDATE customers" in prompt.inner_text()
    png = prompt.screenshot()
    _shot(page, "approval-prompt.png")
    width, channels, rows = _png_pixels(png)
    # The Approve button is JupyterLab's green "success" style: some pixels must be clearly green.
    green = sum(1 for row in rows for x in range(0, width * channels, channels)
                if row[x + 1] > 120 and row[x + 1] > row[x] + 40 and row[x + 1] > row[x + 2] + 40)  # fmt: skip
    assert green > 200, green
    page.locator(".pi-approval:visible").get_by_role("button", name="Approve", exact=True).click()
    page.locator(".pi-tool-card .pi-status:visible", has_text="done").wait_for(timeout=60_000)
    assert page.locator(".pi-approval:visible").get_by_role("button", name="Approve", exact=True).is_disabled()
    assert page.locator(".pi-approval:visible").get_by_role("button", name="Reject", exact=True).is_disabled()
    _shot(page, "approved.png")
    assert _city(lab, 31) == "Browser-City"
    page.close()


def test_browser_reject_write(lab: dict[str, Any]) -> None:
    page = _open(lab, "reject.ipynb", ["%load_ext pi_notebook",
                                       "%%pi\nUPDATE customers SET city = 'Never' WHERE customer_id = 32"])
    page.locator(".pi-approval:visible").wait_for(timeout=60_000)
    page.locator(".pi-approval:visible").get_by_role("button", name="Reject", exact=True).click()
    page.locator(".pi-tool-card .pi-status:visible", has_text="blocked").wait_for(timeout=60_000)
    assert "Rejected by user." in page.locator(".pi-error:visible").inner_text()
    _shot(page, "rejected.png")
    assert _city(lab, 32) != "Never"
    page.close()


def test_browser_dataframe_renders(lab: dict[str, Any]) -> None:
    page = _open(lab, "read.ipynb", ["%load_ext pi_notebook",
                                     "%%pi\nSELECT customer_id, name, city FROM customers ORDER BY customer_id LIMIT 5"])
    table = page.locator(".pi-tool-card table.dataframe:visible")
    table.wait_for(timeout=60_000)
    assert table.locator("tbody tr").count() == 5
    assert "customer_id" in table.inner_text()
    _shot(page, "dataframe.png")
    page.close()


def test_browser_stop_long_query(lab: dict[str, Any]) -> None:
    sql = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) "
           "SELECT COUNT(*) FROM c")
    page = _open(lab, "stop.ipynb", ["%load_ext pi_notebook", f"%%pi\n{sql}"])
    page.locator(".pi-tool-card .pi-status:visible", has_text="running").wait_for(timeout=60_000)
    started = time.monotonic()
    page.locator(".pi-run:visible button.widget-button", has_text="Stop").first.click()
    page.locator(".pi-run-status:visible", has_text="stopped").wait_for(timeout=20_000)
    assert time.monotonic() - started < 15
    page.locator(".pi-tool-card .pi-status:visible", has_text="error").wait_for(timeout=20_000)
    _shot(page, "stopped.png")
    page.close()
