"""Kernel level: a real ipykernel driven over jupyter_client, clicks sent as a browser sends them.

The Approve / Reject buttons are found in the widget comm messages (``comm_open`` with
``_model_name == "ButtonModel"``); a click is a ``comm_msg`` with
``{"method": "custom", "content": {"event": "click"}}`` to that comm id.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import start_new_kernel

pytestmark = pytest.mark.kernel


class Kernel:
    """A started kernel, with every iopub message kept for searching."""

    def __init__(self, kc: BlockingKernelClient, km: Any = None) -> None:
        self.kc = kc
        self.km = km
        self.log: list[dict[str, Any]] = []

    def _pump(self, timeout: float = 0.1) -> None:
        try:
            while True:
                self.log.append(self.kc.get_iopub_msg(timeout=timeout))
                timeout = 0.01
        except Exception:  # queue.Empty: nothing more for now
            return

    def execute(self, code: str, timeout: float = 90) -> str:
        """Run ``code``; returns its stream output; raises on an error reply."""
        msg_id = self.kc.execute(code)
        return self.finish(msg_id, timeout)

    def messages(self, msg_id: str) -> list[dict[str, Any]]:
        return [m for m in self.log if m["parent_header"].get("msg_id") == msg_id]

    def idle(self, msg_id: str) -> bool:
        self._pump()
        return any(
            m["msg_type"] == "status" and m["content"]["execution_state"] == "idle"
            for m in self.messages(msg_id)
        )

    def finish(self, msg_id: str, timeout: float = 90) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.idle(msg_id):
                mine = self.messages(msg_id)
                errors = [m["content"] for m in mine if m["msg_type"] == "error"]
                if errors:
                    raise AssertionError(f"{errors[0]['ename']}: {errors[0]['evalue']}")
                return "".join(m["content"]["text"] for m in mine if m["msg_type"] == "stream")
        raise TimeoutError(f"no reply to {code_of(msg_id)}")

    def record(self, msg_id: str) -> dict[str, Any]:
        """The record that replaced the run's live view in the cell ``msg_id``."""
        updates = [
            m["content"]
            for m in self.messages(msg_id)
            if m["msg_type"] == "update_display_data"
            and "record_hash" in m["content"]["metadata"].get("pi_notebook", {})
        ]
        assert updates, "the live view was never replaced by a record"
        return updates[-1]

    def buttons(self, description: str) -> list[str]:
        self._pump()
        return [
            m["content"]["comm_id"]
            for m in self.log
            if m["msg_type"] == "comm_open"
            and m["content"]["data"].get("state", {}).get("_model_name") == "ButtonModel"
            and m["content"]["data"]["state"].get("description") == description
        ]

    def wait_for_button(self, description: str, after: int, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.buttons(description)
            if len(found) > after:
                return found[-1]
        raise TimeoutError(f"no {description} button appeared")

    def wait_for_text(self, text: str, since: int, timeout: float = 30) -> None:
        """Wait until a widget's state (an HTML value) contains ``text``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._pump()
            for m in self.log[since:]:
                if m["msg_type"] in ("comm_msg", "comm_open") and text in str(m["content"]["data"]):
                    return
        raise TimeoutError(f"{text!r} never appeared in a widget")

    def click(self, comm_id: str) -> None:
        content = {"comm_id": comm_id, "data": {"method": "custom", "content": {"event": "click"}}}
        self.kc.shell_channel.send(self.kc.session.msg("comm_msg", content))


def code_of(msg_id: str) -> str:
    return msg_id


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kernel, Path]]:
    data = tmp_path_factory.mktemp("kernel_data")
    env = {**os.environ, "PI_NOTEBOOK_DATA_DIR": str(data)}
    env.pop("PI_NOTEBOOK_AUDIT_URL", None)
    env.pop("PI_NOTEBOOK_DATABASE_URL", None)
    km, kc = start_new_kernel(
        kernel_name="python3", env=env, cwd=str(tmp_path_factory.mktemp("cwd"))
    )
    try:
        k = Kernel(kc, km)
        out = k.execute("%load_ext pi_notebook")
        assert "offline" in out and "sample" in out
        yield k, data
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _city(data: Path, customer_id: int) -> str:
    with sqlite3.connect(data / "sample.sqlite") as conn:
        return conn.execute(
            "SELECT city FROM customers WHERE customer_id = ?", (customer_id,)
        ).fetchone()[0]


def test_kernel_busy_cell_takes_the_approve_click_and_leaves_a_record(
    kernel: tuple[Kernel, Path],
) -> None:
    """The ``%%pi`` cell stays busy until its run settles; the click reaches the kernel
    meanwhile, and the live view is replaced by the stamped record."""
    k, data = kernel
    before = len(k.buttons("Approve"))
    msg_id = k.kc.execute("%%pi\nUPDATE customers SET city = 'Kernel-City' WHERE customer_id = 21")
    approve = k.wait_for_button("Approve", before)
    assert not k.idle(msg_id)  # busy while the approval waits
    assert len(k.buttons("Reject")) > before
    k.click(approve)
    k.finish(msg_id)
    assert _city(data, 21) == "Kernel-City"
    record = k.record(msg_id)
    html = record["data"]["text/html"]
    assert "UPDATE customers SET city = &#x27;Kernel-City&#x27;" in html
    assert re.search(r"approved by \S+ · 1 row changed", html)
    stamp = record["metadata"]["pi_notebook"]
    (call,) = stamp["calls"]
    assert (call["decision"], call["outcome"]) == ("approved", "ok")
    out = k.execute(
        "df = %pi_audit --kind approval\nprint(list(df.payload.map(lambda p: p['decision'])))"
    )
    assert "approved" in out


def test_kernel_reject_click_while_the_cell_is_busy(kernel: tuple[Kernel, Path]) -> None:
    k, data = kernel
    before = len(k.buttons("Reject"))
    msg_id = k.kc.execute("%%pi\nUPDATE customers SET city = 'Never' WHERE customer_id = 22")
    k.click(k.wait_for_button("Reject", before))
    k.finish(msg_id)
    assert _city(data, 22) != "Never"
    record = k.record(msg_id)
    assert "⊘ blocked" in record["data"]["text/plain"]
    assert record["metadata"]["pi_notebook"]["calls"][0]["decision"] == "rejected"
    out = k.execute("df = %pi_audit\nprint(sorted(set(df.kind)))")
    assert "approval" in out and "notebook_output" in out


def test_kernel_read_then_pi_result_with_no_wait(kernel: tuple[Kernel, Path]) -> None:
    k, _ = kernel
    msg_id = k.kc.execute("%%pi\nSELECT COUNT(*) AS n FROM customers")
    k.finish(msg_id)
    out = k.execute("r = %pi_result\nprint(len(r), r.columns[0])")
    assert out.split() == ["1", "n"]
    record = k.record(msg_id)
    assert "<table" in record["data"]["text/html"]
    assert "text/markdown" in record["data"]


def test_kernel_expired_approval_settles_the_cell(kernel: tuple[Kernel, Path]) -> None:
    k, data = kernel
    k.execute("%config PiNotebook.approval_timeout = 1.0")
    try:
        msg_id = k.kc.execute("%%pi\nDELETE FROM customers WHERE customer_id = 23")
        k.finish(msg_id, timeout=60)
    finally:
        k.execute("%config PiNotebook.approval_timeout = 300.0")
    record = k.record(msg_id)
    assert record["metadata"]["pi_notebook"]["calls"][0]["decision"] == "expired"
    assert "expired" in record["data"]["text/html"]
    with sqlite3.connect(data / "sample.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*) FROM customers WHERE customer_id = 23").fetchone()[0]


def test_kernel_interrupt_stops_a_slow_query(kernel: tuple[Kernel, Path]) -> None:
    """The kernel's interrupt stops the run as Stop does: the query is cancelled within
    seconds, the call ends aborted and the record says the run was stopped."""
    k, _ = kernel
    sql = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) "
        "SELECT COUNT(*) FROM c"
    )
    since = len(k.log)
    msg_id = k.kc.execute(f"%%pi\n{sql}")
    k.wait_for_text("running", since)
    started = time.monotonic()
    k.km.interrupt_kernel()
    deadline = time.monotonic() + 20
    while not k.idle(msg_id):
        assert time.monotonic() < deadline, "the interrupt did not stop the run"
    assert time.monotonic() - started < 15
    errors = [m["content"] for m in k.messages(msg_id) if m["msg_type"] == "error"]
    assert errors and errors[0]["ename"] == "RunInterrupted"
    assert errors[0]["traceback"] == [f"KeyboardInterrupt: {errors[0]['evalue']}"]
    assert errors[0]["evalue"] == "the run was stopped; its record is above."
    record = k.record(msg_id)
    assert "■ stopped (interrupted)" in record["data"]["text/plain"]
    (call,) = record["metadata"]["pi_notebook"]["calls"]
    assert call["outcome"] == "aborted"
    out = k.execute("print('still here')")  # and the kernel is fine
    assert out.strip() == "still here"


def test_kernel_bad_input_keeps_kernel_working(kernel: tuple[Kernel, Path]) -> None:
    k, _ = kernel
    # IPython reports a UsageError as one line on stderr, without a traceback.
    for line in (
        "%pi_connect notaurl",
        "%pi_model no-such-model",
        "%pi_tools --bogus",
        "%%pi --fast\nSELECT 1",
        "%%pi\n   ",
        "%%pi -o 1bad\nSELECT 1",
    ):
        out = k.execute(line)
        assert out.startswith("UsageError: ") and out.strip().count("\n") == 0, out
    k.execute("%%pi\nSELECT COUNT(*) AS n FROM customers")
    out = k.execute("r = %pi_result\nprint(current_ok := len(r))")
    assert out.split() == ["1"]


def test_kernel_background_cell_returns_at_once(kernel: tuple[Kernel, Path]) -> None:
    k, _ = kernel
    before = len(k.buttons("Approve"))
    k.execute("%%pi --background\nUPDATE customers SET city = 'Later' WHERE customer_id = 24")
    k.wait_for_button("Approve", before)  # the cell is done; the run waits for a person
    out = k.execute(
        "from pi_notebook.notebook import current\n"
        "run = current().last_run\n"
        "(await run.next_prompt()).approve()\n"
        "st = await run.wait(60)\nprint(st.status, st.card_list()[0].word)"
    )
    assert out.split() == ["done", "approved"]


def test_kernel_pi_cell_interpolates_names_and_pi_usage(kernel: tuple[Kernel, Path]) -> None:
    k, _ = kernel
    k.execute("wanted = 5")
    msg_id = k.kc.execute(
        "%%pi\nSELECT customer_id, name FROM customers WHERE customer_id = {wanted}"
    )
    k.finish(msg_id)
    html = k.record(msg_id)["data"]["text/html"]
    assert "WHERE customer_id = 5" in html and "{wanted}" not in html
    out = k.execute("u = %pi_usage\nprint(list(u.columns)[:3], bool(u.current.iloc[-1]))")
    assert out.split() == ["['session',", "'model',", "'requests']", "True"]


def test_kernel_offline_model_given_english_replies_with_help(kernel: tuple[Kernel, Path]) -> None:
    """English in a ``%%pi`` cell (the first thing a user without a key types): even where
    it parses as SQL, no approval prompt appears, no call is made, and the record is the help
    reply."""
    k, data = kernel
    for sentence in (
        "Show me the 5 most expensive products.",
        "delete from orders where it is cancelled",
        "Update products set price = cheaper",
        "select 5 products from the shop",
    ):
        before = len(k.buttons("Approve"))
        msg_id = k.kc.execute(f"%%pi\n{sentence}")
        k.finish(msg_id)
        assert len(k.buttons("Approve")) == before, sentence
        record = k.record(msg_id)
        plain = record["data"]["text/plain"]
        assert plain.startswith("✔ done · 0 calls"), plain
        assert "not an LLM" in plain and "list the tables" in plain, plain
        assert record["metadata"]["pi_notebook"]["calls"] == []
    with sqlite3.connect(data / "sample.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*) FROM orders WHERE status = 'cancelled'").fetchone()[0]


def test_kernel_pi_cell_o_binds_the_result_in_the_same_cell(kernel: tuple[Kernel, Path]) -> None:
    """``%%pi -o NAME``: the awaited cell has bound NAME when it ends; a ``--background``
    cell binds it when its run settles; a run without a result DataFrame says NAME was not
    set, in the cell's output."""
    k, _ = kernel
    out = k.execute("%%pi -o counted\nSELECT COUNT(*) AS n FROM customers")
    assert out == ""
    out = k.execute("print(type(counted).__name__, list(counted.columns), len(counted))")
    assert out.split() == ["DataFrame", "['n']", "1"]
    k.execute("%%pi --background -o later\nSELECT customer_id FROM customers ORDER BY 1 LIMIT 2")
    out = k.execute(
        "from pi_notebook.notebook import current\n"
        "await current().last_run.wait(60)\nprint(list(later.customer_id))"
    )
    assert out.strip() == "[1, 2]"
    out = k.execute("%%pi -o nothing\nShow me the 5 most expensive products.")
    assert out.strip() == "No result DataFrame from this run (done): nothing was not set."
    assert k.execute("print('nothing' in dir())").strip() == "False"


def test_kernel_interrupt_stops_a_background_run(kernel: tuple[Kernel, Path]) -> None:
    """The ■ with no cell running stops a ``--background`` run as Stop does: the query is
    cancelled, the record says so; afterwards the idle kernel ignores interrupts again, and
    an interrupt of another cell stays that cell's."""
    k, _ = kernel
    sql = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) "
        "SELECT COUNT(*) FROM c"
    )
    since = len(k.log)
    k.execute(f"%%pi --background\n{sql}")  # the cell is done at once
    k.wait_for_text("running", since)
    probe = "from pi_notebook.notebook import current\nprint(current().last_run.state.status)"
    busy = k.kc.execute("import time\ntime.sleep(20)")  # another cell: the ■ is its own
    time.sleep(1)
    k.km.interrupt_kernel()
    with pytest.raises(AssertionError, match="KeyboardInterrupt"):
        k.finish(busy, timeout=15)
    assert k.execute(probe).strip() == "running"
    started = time.monotonic()
    k.km.interrupt_kernel()
    while (status := k.execute(probe).strip()) == "running":
        assert time.monotonic() - started < 15, "the interrupt did not stop the background run"
        time.sleep(0.2)
    assert status == "stopped"
    out = k.execute(
        "run = current().last_run\nawait run.wait(30)\n"
        "print(run.metadata['calls'][0]['outcome'])\n"
        "import signal\nprint(get_ipython().kernel.saved_sigint_handler is signal.SIG_IGN)"
    )
    assert out.split() == ["aborted", "True"]
    updates = [
        m["content"]["data"]["text/plain"]
        for m in k.log[since:]
        if m["msg_type"] == "update_display_data"
    ]
    assert any("■ stopped (interrupted)" in u for u in updates)
    k.km.interrupt_kernel()  # idle, no run: ignored as before
    time.sleep(0.5)
    assert k.execute("print('still here')").strip() == "still here"
