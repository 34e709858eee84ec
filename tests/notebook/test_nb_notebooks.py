"""The notebooks execute without error (kernel ``python3`` of this environment, cwd notebooks/)."""

from __future__ import annotations

import os
import re
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
    nbclient.NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=180,
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    ).execute()
    return notebook


def _texts(notebook: nbformat.NotebookNode) -> str:
    out = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            out.append(output.get("text", "") or output.get("data", {}).get("text/plain", ""))
    return "\n".join(out)


def _cell_with(notebook: nbformat.NotebookNode, source_start: str) -> nbformat.NotebookNode:
    return next(c for c in notebook.cells if c.source.startswith(source_start))


def test_quickstart_executes() -> None:
    notebook = _execute("quickstart.ipynb")
    text = _texts(notebook)
    assert "pi_notebook: model offline" in text
    assert "done approved" in text  # the approved write finished
    # The read's record: its SQL, a value of its result, and the answer.
    read = _cell_with(notebook, "%%pi\nHow many orders").outputs[0]["data"]
    assert "SELECT status, COUNT(*) AS orders" in read["text/html"]
    assert "delivered" in read["text/html"] and "delivered" in read["text/plain"]
    assert read["text/markdown"].startswith("Running this SQL with `query_database`.")
    # %pi_result gave the same rows as a DataFrame (an HTML table with the status column).
    frame = _cell_with(notebook, "%pi_result").outputs[0]["data"]
    assert "<table" in frame["text/html"] and "delivered" in frame["text/html"]
    # It is an ordinary DataFrame: the next cell plots it.
    plot = _cell_with(notebook, "orders_by_status.plot.bar").outputs
    assert any("image/png" in o.get("data", {}) for o in plot)
    # The write's record says it was approved and changed one row.
    write = _cell_with(notebook, "%%pi --background").outputs[0]["data"]["text/plain"]
    assert re.search(r"approved by \S+ · 1 row changed", write), write
    assert "UPDATE customers SET city = 'Oslo' WHERE customer_id = 1" in write


def test_s36_lesson_answers_the_ten_questions() -> None:
    notebook = _execute("tool_system_lesson.ipynb")
    text = _texts(notebook)
    for number in range(1, 11):
        assert f"'Q{number} ok'" in text


def test_the_lesson_asks_before_it_answers() -> None:
    """Each self-test question shows the question; its answer is folded away until the
    learner opens it, and the checking cell comes after it."""
    notebook = nbformat.read(NOTEBOOKS / "tool_system_lesson.ipynb", as_version=4)
    cells = notebook.cells
    questions = [
        i
        for i, c in enumerate(cells)
        if c.cell_type == "markdown" and re.match(r"### Q\d+\. ", c.source)
    ]
    assert len(questions) == 10
    for index in questions:
        head, _, rest = cells[index].source.partition("\n")
        assert head.rstrip().endswith("?"), head
        before, _, folded = rest.partition("<details><summary>")
        assert not before.strip() and "</details>" in folded, cells[index].source
        check = cells[index + 1]
        assert check.cell_type == "code" and "assert" in check.source


def _answered_by_a_person(notebook: nbformat.NotebookNode, how: str) -> None:
    """Insert the clicks a person makes (Reject) or does not make (the prompt runs out)
    before the cells that would approve for them."""
    cells = notebook.cells
    if how == "expire":
        cells.insert(1, nbformat.v4.new_code_cell("%config PiNotebook.approval_timeout = 2"))
    for index in reversed(range(len(cells))):
        source = cells[index].source
        if "await write_run.next_prompt()" in source and how == "reject":
            click = "(await current().last_run.next_prompt()).reject()  # the person clicks Reject"
            cells.insert(index, nbformat.v4.new_code_cell(click))
        elif "_run.next_prompt()" in source and how == "expire":
            wait = "await current().last_run.wait()  # nobody clicks: the prompt runs out"
            cells.insert(index, nbformat.v4.new_code_cell(wait))


@pytest.mark.parametrize("how", ["reject", "expire"])
def test_lesson_works_whichever_way_the_person_answers(how: str) -> None:
    """§14 invites a click on Reject, and a person may not click at all: every later cell
    still runs, and the self-test still passes."""
    notebook = nbformat.read(NOTEBOOKS / "tool_system_lesson.ipynb", as_version=4)
    _answered_by_a_person(notebook, how)
    nbclient.NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=180,
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    ).execute()
    text = _texts(notebook)
    for number in range(1, 11):
        assert f"'Q{number} ok'" in text
    word = "'rejected'" if how == "reject" else "'expired'"
    write = next(c for c in notebook.cells if "write_run = current().last_run" in c.source)
    assert write.outputs[-1]["data"]["text/plain"] == word


def test_the_lesson_names_and_links_the_chapter_it_follows() -> None:
    notebook = nbformat.read(NOTEBOOKS / "tool_system_lesson.ipynb", as_version=4)
    intro = notebook.cells[0].source
    assert "通过 Extension 添加和包装工具" in intro and "Adding and wrapping tools" in intro
    assert "[`docs/spec.md`](../docs/spec.md)" in intro and "English rendering" in intro
    assert (NOTEBOOKS.parent / "docs" / "spec.md").read_text().count("## S: what the chapter says")


def test_lab_headless_prints_outputs() -> None:
    script = Path(__file__).resolve().parents[2] / "scripts" / "lab.py"
    done = subprocess.run(
        [sys.executable, str(script), "--headless"],
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    assert "pi_notebook: model offline" in done.stdout
    assert "delivered" in done.stdout


def _stamped(notebook: nbformat.NotebookNode) -> list[dict]:
    return [
        o
        for c in notebook.cells
        for o in c.get("outputs", [])
        if "pi_notebook" in o.get("metadata", {})
    ]


def _check_against_audit(path: Path, audit_url: str) -> list[str]:
    """Each stamped output against its notebook_output record (digest, run, calls)."""
    from pi_notebook.audit import AuditLog
    from pi_notebook.audit.notebook import output_digest

    problems = []
    notebook = nbformat.read(path, as_version=4)
    with AuditLog(audit_url) as audit:
        frame = audit.to_dataframe(kind="notebook_output")
    records = dict(zip(frame["hash"], frame["payload"], strict=True))
    for output in _stamped(notebook):
        meta = output["metadata"]["pi_notebook"]
        record = records.get(meta["record_hash"])
        if record is None or record["run_id"] != meta["run_id"]:
            problems.append(f"unknown output {meta['run_id']}")
        elif output_digest(output["data"]) != record["output_digest"]:
            problems.append(f"altered output {meta['run_id']}")
    return problems


def test_executed_quickstart_saved_and_converted_keeps_the_record(tmp_path: Path) -> None:
    """nbclient runs the quickstart with no explicit wait after the read; the saved file,
    converted by nbconvert's HTML exporter without widget state, still shows the SQL, a
    result value and the answer, and every stamped output matches its audit record."""
    from nbconvert import HTMLExporter

    from pi_notebook.audit import verify_notebook

    notebook = _execute("quickstart.ipynb")
    stamped = _stamped(notebook)
    assert len(stamped) == 2
    for output in stamped:
        assert {"text/html", "text/markdown", "text/plain"} <= set(output["data"])
        meta = output["metadata"]["pi_notebook"]
        assert {"run_id", "session_id", "model", "output_digest", "record_hash", "calls"} <= set(
            meta
        )
        assert all(c["audit_hash"] and c["args_hash"] for c in meta["calls"])
    assert [c["decision"] for o in stamped for c in o["metadata"]["pi_notebook"]["calls"]] == [
        "allowed",
        "approved",
    ]
    path = tmp_path / "quickstart.ipynb"
    notebook.metadata.pop("widgets", None)  # no widget state: the record must stand alone
    nbformat.write(notebook, path)
    html, _ = HTMLExporter().from_filename(str(path))
    assert "SELECT status, COUNT(*) AS orders" in html
    assert "delivered" in html  # a value of the result table
    assert "query_database</code> finished" in html  # the answer, rendered from Markdown
    assert "Error displaying widget" not in html
    audit_url = f"sqlite:///{Path(os.environ['PI_NOTEBOOK_DATA_DIR']) / 'audit.sqlite'}"
    assert _check_against_audit(path, audit_url) == []
    report = verify_notebook(path, audit_url)
    assert report.ok and report.outputs == 2, report.problems
    edited = nbformat.read(path, as_version=4)
    output = _stamped(edited)[0]
    output["data"]["text/html"] = output["data"]["text/html"].replace("delivered", "lost")
    nbformat.write(edited, path)
    assert _check_against_audit(path, audit_url) == [
        f"altered output {output['metadata']['pi_notebook']['run_id']}"
    ]
    report = verify_notebook(path, audit_url)
    assert not report.ok and len(report.problems) == 1 and "altered" in report.problems[0]
    # The record binds its cell's prompt; a stripped stamp is named too.
    edited = nbformat.read(path, as_version=4)
    output = _stamped(edited)[0]
    output["data"]["text/html"] = output["data"]["text/html"].replace("lost", "delivered")
    cells = [c for c in edited.cells if c.get("outputs") and _stamped_in(c)]
    cells[1].source = cells[1].source.replace("Oslo", "Paris")
    cells[0].outputs[0]["metadata"] = {}
    nbformat.write(edited, path)
    problems = verify_notebook(path, audit_url).problems
    read_cell, write_cell = (edited.cells.index(c) for c in cells[:2])
    assert [p.split(" (")[0] for p in problems] == [
        f"cell {write_cell} output 0: altered",
        f"cell {read_cell} output 0: unstamped",
    ]
    assert "prompt is not the prompt that ran" in problems[0]


def _stamped_in(cell: nbformat.NotebookNode) -> bool:
    return any("pi_notebook" in o.get("metadata", {}) for o in cell.get("outputs", []))


def test_pi_audit_verify_notebook_names_the_altered_output(tmp_path: Path) -> None:
    """``%pi_audit --verify-notebook PATH`` passes on the executed quickstart and names the
    output whose record was edited (needs the audit's ``verify_notebook``)."""
    notebook = _execute("quickstart.ipynb")
    path = tmp_path / "shared.ipynb"
    nbformat.write(notebook, path)
    check = nbformat.v4.new_code_cell(f"%pi_audit --verify-notebook {path}")
    runner = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("%load_ext pi_notebook"), check]
    )
    nbclient.NotebookClient(runner, kernel_name="python3", timeout=120).execute()
    text = runner.cells[1].outputs[0]["text"]
    assert text.startswith("OK: 2 stamped output(s) and 2 call(s) match the audit."), text
    output = _stamped(notebook)[0]
    output["data"]["text/html"] = output["data"]["text/html"].replace("delivered", "lost")
    nbformat.write(notebook, path)
    runner.cells[1].outputs = []
    nbclient.NotebookClient(runner, kernel_name="python3", timeout=120).execute()
    text = runner.cells[1].outputs[0]["text"]
    problem = "cell 3 output 0: altered (its content does not match its audit record)"
    assert text.splitlines() == ["NOT OK: 1 problem(s) in 2 stamped output(s):", f"- {problem}"]
    assert text.count(problem) == 1  # named once, not twice
