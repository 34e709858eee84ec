"""The notebook's run view per tool call, beside the bare session on the same workload.

Workload: a scripted model makes N calls of a no-op tool, one per turn (50, 200, 800 and
1,000 turns), then answers. What is timed is one ``prompt()`` from start to the settled run:

* ``session``: ``create_agent_session`` with the tool, ``audit=False``, one no-op subscriber
  (the calibration point: what a call costs without any notebook).
* ``Run``: the same session driven by ``pi_notebook.notebook.Run``: every event goes through
  the store's reducer and the live ``RunView`` (widgets, throttled rendering, only changed
  cards re-rendered), and the durable record is rendered at the end (audit stamping off).

The figure is the notebook's cost per call (Run minus session, divided by calls) and its
ratio to the session's own per-call cost. Target: at most 2 ms per call up to
1,000 cards, flat in the number of cards. Times are CPU time (``time.process_time``), the best
of ``--repeat`` runs; no widget front-end is attached (comms are not opened), so this is the
kernel side of rendering.

    PYTHONPATH=$PWD .venv/bin/python bench/bench_notebook.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from typing import Any

from pydantic import BaseModel

from pi_notebook import TextContent, ToolDefinition, ToolResult, create_agent_session, define_tool
from pi_notebook.notebook import Run
from pi_notebook.testing import ScriptedModel, text, tool_call

TURNS = [50, 200, 800, 1_000]
TARGET_MS = 2.0


class _P(BaseModel):
    x: int


async def _noop(tool_call_id: str, params: _P, signal: Any, on_update: Any, ctx: Any) -> ToolResult:
    on_update(ToolResult(content=[TextContent(text="working")]))
    return ToolResult(content=[TextContent(text="ok")], details={"x": params.x})


TOOL = define_tool(
    ToolDefinition(name="noop", label="No-op", description="Nothing.", parameters=_P, execute=_noop)
)


def _session(turns: int) -> Any:
    steps: list[Any] = [[tool_call("noop", {"x": i}, id=f"c{i}")] for i in range(turns)]
    return create_agent_session(
        model=ScriptedModel([*steps, text("done")]),
        custom_tools=[TOOL],
        audit=False,
        builtin_tools=False,
    )


async def _bare(turns: int) -> float:
    session = _session(turns)
    session.subscribe(lambda _e: None)
    started = time.process_time()
    await session.prompt("go")
    elapsed = time.process_time() - started
    await session.close()
    return elapsed


async def _run(turns: int) -> float:
    session = _session(turns)
    run = Run(session, "go", label_of=lambda n: "No-op")
    started = time.process_time()
    run.start()
    await run.settle()
    elapsed = time.process_time() - started
    assert run.record is not None and len(run.view.cards) == turns
    await session.close()
    return elapsed


def _best(fn: Any, turns: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        best = min(best, asyncio.run(fn(turns)))
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="best of 1")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeat = 1
    print(
        f"{'calls':>6} {'session µs/call':>16} {'Run µs/call':>12} {'notebook ms/call':>17} "
        f"{'ratio':>6}  target ≤ {TARGET_MS} ms"
    )
    worst = 0.0
    for turns in TURNS:
        bare = _best(_bare, turns, args.repeat)
        full = _best(_run, turns, args.repeat)
        extra_ms = max(0.0, full - bare) / turns * 1000
        worst = max(worst, extra_ms)
        print(
            f"{turns:>6,} {bare / turns * 1e6:>16,.0f} {full / turns * 1e6:>12,.0f} "
            f"{extra_ms:>17.3f} {full / bare:>6.1f}x"
        )
    print(
        f"worst notebook cost per call: {worst:.3f} ms ({'meets' if worst <= TARGET_MS else 'misses'} the target)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
