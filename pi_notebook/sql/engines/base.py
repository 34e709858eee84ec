"""What one engine is, for the tool: the facts :func:`pi_notebook.database.engines` reports
and the dispatch of a URL to the backend that runs it."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

__all__ = ["DialectOnly", "EngineInfo", "MissingExtra", "ReadEstimate"]


@dataclass(frozen=True, kw_only=True)
class ReadEstimate:
    """The engine's estimate of what a read scans, before it runs (for a read budget).

    Attributes:
        rows: rows it would read, or ``None`` when the engine gave no estimate.
        bytes: bytes it would read, or ``None``.
        source: where the numbers come from, or why there are none.
    """

    rows: int | None
    bytes: int | None
    source: str

    def details(self) -> dict[str, int | str | None]:
        """``{"rows", "bytes", "source"}``, as a result's ``details["estimate"]``."""
        return {"rows": self.rows, "bytes": self.bytes, "source": self.source}


class MissingExtra(ValueError):
    """The URL's engine needs an optional extra that is not installed."""


class DialectOnly(ValueError):
    """The URL's engine is ``dialect only``: its SQL is classified, but the tool cannot
    connect to it yet."""


@dataclass(frozen=True, kw_only=True)
class EngineInfo:
    """One engine on the seam (one module per engine under ``pi_notebook.sql.engines``).

    Attributes:
        engine: the engine's name (``sqlite``, ``postgresql``, ``clickhouse``...).
        dialect: the sqlglot dialect its statements are classified in.
        url_scheme: the URL scheme(s) as a user writes them.
        schemes: the SQLAlchemy backend names or URL schemes that select it.
        read_only_backstop: the engine's own wall behind the classifier, in words.
        bounds: how a read is bounded (rows, bytes, time, memory).
        cancel: how a running statement is cancelled (Stop, the statement timeout), or
            ``None`` where the tool runs nothing on the engine.
        write_preview: how a write is measured before a person is asked, or why it cannot be.
        estimate: how a read's cost is estimated before it runs, or ``None``.
        arrow: results can come as Arrow from the engine's client.
        read_path: how a read's rows reach the DataFrame.
        extra: the ``pi-notebook`` extra that installs its client, if any.
        modules: the modules that extra provides (checked before the URL is used).
        tested_against: what the tests run it on: ``live``, ``emulator`` or ``dialect only``
            (also for an engine the tool connects to whose client path met only a scripted
            server in the tests: its ``read_only_backstop`` and ``read_path`` say so).
        connects: the tool can connect to the engine; ``False`` for a ``dialect only``
            engine, whose SQL is classified but whose URL is refused.
        memory_capped: the engine runs in a process of its own under an operating-system
            memory cap, so a read that builds huge values is stopped by the cap, not the
            kernel: the classifier's rules that only protect the kernel's memory do not ask
            (``classify(..., memory_bounded=True)``). ``False``: they ask. DuckDB's worker process
            runs under ``memory_limit_bytes`` (see ``pi_notebook.sql.backend.engine_process``).
    """

    engine: str
    dialect: str
    url_scheme: str
    schemes: tuple[str, ...]
    read_only_backstop: str
    bounds: str
    cancel: str | None
    write_preview: str
    estimate: str | None = None
    arrow: bool = False
    read_path: str = ""
    extra: str | None = None
    modules: tuple[str, ...] = ()
    tested_against: str = "live"
    connects: bool = True
    memory_capped: bool = False

    def dialect_only(self) -> str | None:
        """One line saying the tool cannot connect to this engine yet, or ``None``."""
        if self.connects:
            return None
        return (
            f"{self.engine} is 'dialect only' so far: classify(sql, {self.dialect!r}) "
            "judges its SQL, but query_database cannot connect to it yet"
        )

    def missing_extra(self) -> str | None:
        """One line naming the extra to install, when a module it provides is missing."""
        if self.extra is None:
            return None
        for module in self.modules:
            if importlib.util.find_spec(module) is None:
                return (
                    f"{self.engine} needs the {self.extra!r} extra: "
                    f'pip install "pi-notebook[{self.extra}]"'
                )
        return None
