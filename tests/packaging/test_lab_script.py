"""scripts/lab.py (``make lab``): the user's copies of the notebooks, the repository's links, no
news prompt.

The server is started as ``make lab`` starts it, on a root that mirrors the repository (its
``notebooks/`` and ``docs/``), and asked over its REST API and its page what a user would see.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "lab.py"


def _lab_module() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("pi_lab_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_working_copies_are_made_once_and_never_replaced(tmp_path: Path) -> None:
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "a.ipynb").write_text("original")
    lab = _lab_module()
    work = lab.working_copies(tmp_path)
    assert work == tmp_path / "my-notebooks"
    assert (work / "a.ipynb").read_text() == "original"
    (work / "a.ipynb").write_text("the user's edits")
    lab.working_copies(tmp_path)
    assert (work / "a.ipynb").read_text() == "the user's edits"
    assert (tmp_path / "notebooks" / "a.ipynb").read_text() == "original"


def test_my_notebooks_is_ignored_by_git() -> None:
    done = subprocess.run(
        ["git", "check-ignore", "-q", "my-notebooks/quickstart.ipynb"], cwd=REPO, check=False
    )
    if done.returncode == 128:
        pytest.skip("not a git checkout")
    assert done.returncode == 0


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read()


def test_lab_serves_the_copies_with_working_links_and_no_news(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    for name in ("notebooks", "docs"):
        (root / name).symlink_to(REPO / name)
    config, data = tmp_path / "config", tmp_path / "data"
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTER_DATA_DIR": str(data),
        "PI_NOTEBOOK_DATA_DIR": str(data),
    }
    env.pop("JUPYTER_CONFIG_PATH", None)
    server = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--root", str(root)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = ""
        deadline = time.monotonic() + 90
        while not url and time.monotonic() < deadline:
            line = server.stdout.readline()
            if not line:
                break
            if line.startswith("http://127.0.0.1:"):
                url = line.strip()
        assert url, "lab.py printed no URL"
        match = re.match(r"(http://127\.0\.0\.1:\d+)/lab/tree/(.+)\?token=(\w+)$", url)
        assert match is not None, url
        base, opened, token = match.groups()
        assert opened == "my-notebooks/quickstart.ipynb"
        model = json.loads(_get(f"{base}/api/contents/{opened}?token={token}&content=0"))
        assert model["type"] == "notebook"
        # The lesson's link ../docs/spec.md resolves from the copy, as from notebooks/.
        spec = json.loads(_get(f"{base}/api/contents/docs/spec.md?token={token}&content=0"))
        assert spec["type"] == "file"
        page = _get(f"{base}/lab?token={token}").decode()
        found = re.search(
            r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', page, re.S
        )
        assert found is not None
        page_config = json.loads(found.group(1))
        assert "@jupyterlab/apputils-extension:announcements" in page_config["disabledExtensions"]
        assert (root / "my-notebooks" / "tool_system_lesson.ipynb").is_file()
    finally:
        server.terminate()
        server.wait(timeout=30)
        if server.stdout is not None:
            server.stdout.close()
