"""A run that never settles still leaves a true record: the provisional record.

A real ipykernel over jupyter_client: a ``%%pi`` write waits for approval, the kernel is
restarted, and the notebook is saved from the outputs received, as a front-end saves them
(display data replaced by display id). The saved cell keeps the prompt, the SQL, ``awaiting
approval`` and ``interrupted: nothing ran after this point``; ``verify_notebook`` accepts it as
a provisional record, not a settled run, and still names what was tampered with.
"""

from __future__ import annotations

import html
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client.manager import start_new_kernel
from test_nb_kernel import Kernel

from pi_notebook.audit import verify_notebook
from pi_notebook.notebook.provisional import INTERRUPTED

pytestmark = pytest.mark.kernel


@pytest.fixture
def kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Kernel, Path]]:
    data = tmp_path / "data"
    data.mkdir()
    env = {**os.environ, "PI_NOTEBOOK_DATA_DIR": str(data)}
    env.pop("PI_NOTEBOOK_AUDIT_URL", None)
    env.pop("PI_NOTEBOOK_DATABASE_URL", None)
    monkeypatch.setenv("PI_NOTEBOOK_DATA_DIR", str(data))  # verify_notebook's default store
    monkeypatch.delenv("PI_NOTEBOOK_AUDIT_URL", raising=False)
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(tmp_path))
    try:
        yield Kernel(kc, km), data
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _city(data: Path, customer_id: int) -> str:
    with sqlite3.connect(data / "sample.sqlite") as conn:
        return conn.execute(
            "SELECT city FROM customers WHERE customer_id = ?", (customer_id,)
        ).fetchone()[0]


def _saved(k: Kernel, cells: list[tuple[str, str]]) -> Any:
    """The notebook a front-end saves from the messages received: each cell's outputs, every
    ``update_display_data`` applied to the outputs shown with its display id."""
    k._pump()  # pyright: ignore[reportPrivateUsage]
    by_id: dict[str, list[dict[str, Any]]] = {}
    sources: list[tuple[str, list[dict[str, Any]]]] = []
    for source, msg_id in cells:
        outputs: list[dict[str, Any]] = []
        for m in k.messages(msg_id):
            kind, content = m["msg_type"], m["content"]
            if kind == "display_data":
                out = {
                    "output_type": kind,
                    "data": content["data"],
                    "metadata": content.get("metadata", {}),
                }
                outputs.append(out)
                display_id = content.get("transient", {}).get("display_id")
                if display_id:
                    by_id.setdefault(display_id, []).append(out)
            elif kind == "stream":
                outputs.append(
                    {"output_type": "stream", "name": content["name"], "text": content["text"]}
                )
        sources.append((source, outputs))
    for m in k.log:  # in the order they came, from whichever cell sent them
        if m["msg_type"] == "update_display_data":
            content = m["content"]
            for out in by_id.get(content.get("transient", {}).get("display_id"), []):
                out["data"], out["metadata"] = content["data"], content.get("metadata", {})
    notebook = nbformat.v4.new_notebook()
    for source, outputs in sources:
        cell = nbformat.v4.new_code_cell(source)
        cell.outputs = [nbformat.from_dict(o) for o in outputs]
        notebook.cells.append(cell)
    return notebook


def _wait_for_update(k: Kernel, text: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        k._pump()  # pyright: ignore[reportPrivateUsage]
        for m in reversed(k.log):
            if m["msg_type"] in ("update_display_data", "display_data") and text in str(
                m["content"]["data"].get("text/plain", "")
            ):
                return m["content"]
    raise TimeoutError(f"no display update with {text!r}")


def _html_of(cell: Any) -> str:
    return "".join(
        str(o["data"].get("text/html", ""))
        for o in cell.outputs
        if o["output_type"] == "display_data"
    )


def _write(notebook: Any, path: Path) -> Path:
    nbformat.write(notebook, str(path))
    return path


SQL = "UPDATE customers SET city = 'Never-Saved' WHERE customer_id = 25"


def _restarted_during_prompt(k: Kernel) -> Any:
    load = k.kc.execute("%load_ext pi_notebook")
    k.finish(load)
    cell = k.kc.execute(f"%%pi\n{SQL}")
    _wait_for_update(k, "awaiting approval")
    k.km.restart_kernel(now=True)
    return _saved(k, [("%load_ext pi_notebook", load), (f"%%pi\n{SQL}", cell)])


def test_a_restart_during_a_prompt_leaves_the_prompt_the_sql_and_what_did_not_run(
    kernel: tuple[Kernel, Path], tmp_path: Path
) -> None:
    k, data = kernel
    path = _write(_restarted_during_prompt(k), tmp_path / "restarted.ipynb")
    cell = nbformat.read(str(path), as_version=4).cells[1]
    kinds = [sorted(o["data"]) for o in cell.outputs if o["output_type"] == "display_data"]
    assert ["application/vnd.jupyter.widget-view+json", "text/plain"] in kinds  # the dead view
    page = _html_of(cell)
    assert html.escape(SQL) in page  # the SQL, in the prompt line and on its card
    assert "awaiting approval" in page and INTERRUPTED in page
    (plain,) = [
        o["data"]["text/plain"]
        for o in cell.outputs
        if "pi-provisional" in str(o["data"].get("text/html", ""))
    ]
    assert plain.startswith("◌ interrupted · 1 call · model ")
    assert "Prompt:" in plain and SQL in plain and plain.endswith(INTERRUPTED)
    assert "awaiting approval" in plain
    assert _city(data, 25) != "Never-Saved"  # nothing ran
    report = verify_notebook(path)
    assert report.ok, str(report)
    assert (report.provisional, report.outputs, report.calls) == (1, 0, 0)
    assert "1 provisional record(s) of runs that did not settle" in str(report)


def test_a_tampered_provisional_record_is_named(
    kernel: tuple[Kernel, Path], tmp_path: Path
) -> None:
    k, _data = kernel
    notebook = _restarted_during_prompt(k)
    (index,) = [
        i for i, o in enumerate(notebook.cells[1].outputs) if "pi_notebook" in o.get("metadata", {})
    ]
    provisional = notebook.cells[1].outputs[index]

    edited = notebook
    edited.cells[1].source = "%%pi\nUPDATE customers SET city = 'Other' WHERE customer_id = 25"
    report = verify_notebook(_write(edited, tmp_path / "prompt.ipynb"))
    assert not report.ok and "its cell's prompt is not the prompt that ran" in str(report)

    edited.cells[1].source = f"%%pi\n{SQL}"
    stamp = provisional["metadata"].pop("pi_notebook")
    report = verify_notebook(_write(edited, tmp_path / "unstamped.ipynb"))
    assert not report.ok and "unstamped" in str(report)

    provisional["metadata"]["pi_notebook"] = stamp
    edited.cells[1].outputs.append(nbformat.from_dict(dict(provisional)))
    report = verify_notebook(_write(edited, tmp_path / "twice.ipynb"))
    assert not report.ok and "duplicated" in str(report)


def test_a_settled_run_leaves_one_record_and_an_old_provisional_is_named(
    kernel: tuple[Kernel, Path], tmp_path: Path
) -> None:
    k, data = kernel
    load = k.kc.execute("%load_ext pi_notebook")
    k.finish(load)
    sql = "UPDATE customers SET city = 'Settled' WHERE customer_id = 26"
    before = len(k.buttons("Approve"))
    cell = k.kc.execute(f"%%pi\n{sql}")
    waiting = _wait_for_update(k, "awaiting approval")
    k.click(k.wait_for_button("Approve", before))
    k.finish(cell)
    assert _city(data, 26) == "Settled"
    notebook = _saved(k, [("%load_ext pi_notebook", load), (f"%%pi\n{sql}", cell)])
    shown = [o for o in notebook.cells[1].outputs if o["output_type"] == "display_data"]
    assert [sorted(o["data"]) for o in shown] == [
        ["text/html", "text/markdown", "text/plain"],
        ["text/plain"],
    ]  # the record where the view was; the provisional output emptied
    assert shown[1]["data"]["text/plain"] == "" and INTERRUPTED not in _html_of(notebook.cells[1])
    report = verify_notebook(_write(notebook, tmp_path / "settled.ipynb"))
    assert report.ok, str(report)
    assert (report.outputs, report.provisional) == (1, 0)

    # The file shows the run's provisional record instead of its record: named.
    shown[0]["data"], shown[0]["metadata"] = waiting["data"], waiting["metadata"]
    notebook.cells[1].outputs = [nbformat.from_dict(dict(o)) for o in notebook.cells[1].outputs]
    report = verify_notebook(_write(notebook, tmp_path / "stale.ipynb"))
    text = str(report)
    assert not report.ok and "stale (run" in text and "behind the audit" in text
    assert "missing" not in text  # named once, as stale

    # A provisional record edited to claim more rows than the audit recorded: named.
    outputs: list[Any] = notebook.cells[1].outputs
    (edited,) = [o for o in outputs if "pi_notebook" in o["metadata"]]
    (call,) = edited["metadata"]["pi_notebook"]["calls"]
    call.update(state="done", decision="approved", outcome="ok", rows=5)
    text = str(verify_notebook(_write(notebook, tmp_path / "rows.ipynb")))
    assert "(rows 5, the audit recorded 1)" in text and "behind the audit" not in text
