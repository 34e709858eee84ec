"""Kernel level: a real ipykernel driven over jupyter_client, clicks sent as a browser sends them.

The Approve / Reject buttons are found in the widget comm messages (``comm_open`` with
``_model_name == "ButtonModel"``); a click is a ``comm_msg`` with
``{"method": "custom", "content": {"event": "click"}}`` to that comm id.
"""

from __future__ import annotations

import os
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

    def __init__(self, kc: BlockingKernelClient) -> None:
        self.kc = kc
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

    def finish(self, msg_id: str, timeout: float = 90) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._pump()
            mine = [m for m in self.log if m["parent_header"].get("msg_id") == msg_id]
            if any(
                m["msg_type"] == "status" and m["content"]["execution_state"] == "idle"
                for m in mine
            ):
                errors = [m["content"] for m in mine if m["msg_type"] == "error"]
                if errors:
                    raise AssertionError(f"{errors[0]['ename']}: {errors[0]['evalue']}")
                return "".join(m["content"]["text"] for m in mine if m["msg_type"] == "stream")
        raise TimeoutError(f"no reply to {code_of(msg_id)}")

    def buttons(self, description: str) -> list[str]:
        self._pump()
        return [m["content"]["comm_id"] for m in self.log
                if m["msg_type"] == "comm_open"
                and m["content"]["data"].get("state", {}).get("_model_name") == "ButtonModel"
                and m["content"]["data"]["state"].get("description") == description]  # fmt: skip

    def wait_for_button(self, description: str, after: int, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.buttons(description)
            if len(found) > after:
                return found[-1]
        raise TimeoutError(f"no {description} button appeared")

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
        k = Kernel(kc)
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


def test_kernel_approve_click_runs_the_write(kernel: tuple[Kernel, Path]) -> None:
    k, data = kernel
    before = len(k.buttons("Approve"))
    k.execute("%%pi\nUPDATE customers SET city = 'Kernel-City' WHERE customer_id = 21")
    approve = k.wait_for_button("Approve", before)
    assert len(k.buttons("Reject")) > before
    k.click(approve)
    out = k.execute("from pi_notebook.notebook import current\n"
                    "st = await current().last_run.wait(60)\n"
                    "print(st.status, st.card_list()[0].status)")  # fmt: skip
    assert out.split() == ["done", "done"]
    assert _city(data, 21) == "Kernel-City"
    out = k.execute(
        "df = %pi_audit --kind approval\nprint(list(df.payload.map(lambda p: p['decision'])))"
    )
    assert "approved" in out


def test_kernel_reject_click_while_a_cell_awaits(kernel: tuple[Kernel, Path]) -> None:
    """The click arrives while another cell awaits the run: ipykernel dispatches comm
    messages beside a busy cell, which is what makes ``await run.wait()`` safe."""
    k, data = kernel
    before = len(k.buttons("Reject"))
    k.execute("%%pi\nUPDATE customers SET city = 'Never' WHERE customer_id = 22")
    msg_id = k.kc.execute("from pi_notebook.notebook import current\n"
                          "st = await current().last_run.wait(60)\n"
                          "print(st.status, st.card_list()[0].status, st.card_list()[0].error)")  # fmt: skip
    reject = k.wait_for_button("Reject", before)
    k.click(reject)
    out = k.finish(msg_id)
    assert out.startswith("done blocked Rejected by user.")
    assert _city(data, 22) != "Never"
    out = k.execute("df = %pi_audit\nprint(sorted(set(df.kind)))")
    assert "approval" in out and "tool_execution_end" in out


def test_kernel_bad_input_keeps_kernel_working(kernel: tuple[Kernel, Path]) -> None:
    k, _ = kernel
    # IPython reports a UsageError as one line on stderr, without a traceback.
    for line in ("%pi_connect notaurl", "%pi_model no-such-model", "%pi_tools --bogus"):
        out = k.execute(line)
        assert out.startswith("UsageError: ") and out.strip().count("\n") == 0, out
    out = k.execute("%%pi\nSELECT COUNT(*) AS n FROM customers")
    out = k.execute(
        "st = await current().last_run.wait(60)\nr = %pi_result\nprint(st.status, len(r))"
    )
    assert out.split() == ["done", "1"]
