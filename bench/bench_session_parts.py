"""Where the session's time goes: each part of one ``query_database`` call switched off in turn.

A diagnostic beside ``bench_session.py``, whose "session, no audit" row it takes apart. Inside
a session a part costs several times what it costs alone in a loop (the rest of the call has
taken the processor's caches meanwhile), so microbenchmarks of single parts mislead; here
each part is replaced by a constant or a no-op, in the same process, the variants
alternating, and the difference from the unchanged session is its cost. The variants break
the product on purpose (no DataFrame, no preview...): this is a measurement, not a mode.

    .venv/bin/python bench/bench_session_parts.py [--calls 1000] [--repeat 4]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import bench_session  # this directory is on sys.path when the script runs
import pandas as pd
from bench_session import session_per_call

import pi_notebook.ai.usage as usage
import pi_notebook.extensions.runner as runner
import pi_notebook.session.retention as retention
import pi_notebook.session.session as session
import pi_notebook.sql.backend.frames as frames
import pi_notebook.sql.backend.inline as inline
from pi_notebook.ai.events import DoneEvent, StartEvent
from pi_notebook.ai.messages import AssistantMessage, TextContent, ToolCall


@contextlib.contextmanager
def _patched(target: Any, name: str, value: Any) -> Iterator[None]:
    original = getattr(target, name)
    setattr(target, name, value)
    try:
        yield
    finally:
        setattr(target, name, original)


class _BareModel:
    """The scripted answers without streaming: a start and a done event per request, no
    request record, no JSON, no partial snapshots, no update events."""

    id = "scripted"
    provider = "scripted"

    def __init__(self, calls: int, tag: str) -> None:
        self._plan = [True, False] + [True] * calls + [False]  # warm-up call, answer, calls
        self._tag, self._turn = tag, 0

    async def stream(self, context: Any, *, signal: Any = None) -> Any:
        turn, self._turn = self._turn, self._turn + 1
        if self._plan[turn]:
            call = ToolCall(
                id=f"{self._tag}-{turn}", name="query_database", arguments={"sql": "SELECT 1"}
            )
            message = AssistantMessage(
                model=self.id, provider=self.provider, content=[call], stop_reason="toolUse"
            )
        else:
            message = AssistantMessage(
                model=self.id, provider=self.provider, content=[TextContent(text="done")]
            )
        yield StartEvent(partial=AssistantMessage(model=self.id, provider=self.provider))
        yield DoneEvent(reason=message.stop_reason, message=message)  # type: ignore[arg-type]


class _PlainContext:
    __slots__ = ("_host", "audit", "extension_path", "signal")

    def __init__(self, host: Any, *, extension_path: str | None = None) -> None:
        self._host, self.extension_path, self.audit, self.signal = host, extension_path, None, None


async def _no_hook(self: Any, context: Any, signal: Any) -> None:
    return None


_FRAME = pd.DataFrame({"1": [1]})

VARIANTS: dict[str, Callable[[], contextlib.AbstractContextManager[None]]] = {
    "unchanged": contextlib.nullcontext,
    "model streaming": lambda: _patched(bench_session, "_script", _BareModel),
    "DataFrame": lambda: _patched(frames.FrameBuilder, "build", lambda self: _FRAME),
    "preview": lambda: _patched(inline, "render_fetched", lambda fetched: "1 row(s)."),
    "extension contexts": lambda: _patched(runner, "ExtensionContext", _PlainContext),
    "result retention": lambda: _patched(retention.ResultRetention, "on_event", lambda s, e: None),
    "tool_call hooks": lambda: _patched(session.AgentSession, "_before_tool_call", _no_hook),
    "tool_result hooks": lambda: _patched(session.AgentSession, "_after_tool_call", _no_hook),
    "usage": lambda: _patched(usage.UsageMeter, "observe", lambda self, event: None),
}


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per timing")
    parser.add_argument("--repeat", type=int, default=4, help="timings per variant: best of N")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'data.sqlite'}"
        await session_per_call(url, None, 300, "warm")
        best = {name: float("inf") for name in VARIANTS}
        for r in range(args.repeat):
            for name, variant in VARIANTS.items():  # alternating: load hits each alike
                with variant():
                    per_call = await session_per_call(url, None, args.calls, f"{r}-{name}")
                best[name] = min(best[name], per_call)
    base = best["unchanged"]
    print(f"session without audit, SQLite, {args.calls} calls, best of {args.repeat}")
    print(f"{'unchanged':28s} {base * 1e6:7.1f} us per call")
    for name, per_call in best.items():
        if name != "unchanged":
            print(
                f"{'without ' + name:28s} {per_call * 1e6:7.1f} us  ({(base - per_call) * 1e6:+5.1f} us)"
            )


if __name__ == "__main__":
    asyncio.run(main())
