"""The notebooks execute without error (kernel ``python3`` of this environment, cwd notebooks/)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest

pytestmark = pytest.mark.kernel

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _execute(name: str) -> nbformat.NotebookNode:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbclient.NotebookClient(notebook, kernel_name="python3", timeout=180,
                            resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()  # fmt: skip
    return notebook


def _texts(notebook: nbformat.NotebookNode) -> str:
    out = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            out.append(output.get("text", "") or output.get("data", {}).get("text/plain", ""))
    return "\n".join(out)


def test_quickstart_executes() -> None:
    notebook = _execute("quickstart.ipynb")
    text = _texts(notebook)
    assert "pi_notebook: model offline" in text
    assert "done approved" in text  # the approved write finished
    htmls = [
        o for c in notebook.cells for o in c.get("outputs", []) if "text/html" in o.get("data", {})
    ]
    assert htmls  # DataFrames rendered


def test_s36_lesson_answers_the_ten_questions() -> None:
    notebook = _execute("tool_system_lesson.ipynb")
    text = _texts(notebook)
    for number in range(1, 11):
        assert f"'Q{number} ok'" in text


def test_lab_headless_prints_outputs() -> None:
    script = Path(__file__).resolve().parents[2] / "scripts" / "lab.py"
    done = subprocess.run([sys.executable, str(script), "--headless"], capture_output=True, text=True,
                          timeout=240, check=True)  # fmt: skip
    assert "pi_notebook: model offline" in done.stdout
    assert "delivered" in done.stdout
