"""Helpers for the audit tests: a fake extension API, fresh PostgreSQL databases, snapshots."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from pi_notebook.audit import AuditLog


class FakePi:
    """The part of the extension API the recorder uses: ``on``, ``on_error``, active tools."""

    def __init__(self, active_tools: list[str] | None = None) -> None:
        self.handlers: dict[str, list[Callable[..., Any]]] = {}
        self.error_handlers: list[Callable[..., Any]] = []
        self.active_tools = active_tools or ["read", "query_database"]

    def on(self, event_type: str, handler: Callable[..., Any]) -> None:
        self.handlers.setdefault(event_type, []).append(handler)

    def on_error(self, handler: Callable[..., Any]) -> None:
        self.error_handlers.append(handler)

    def get_active_tools(self) -> list[str]:
        return list(self.active_tools)

    def emit(self, event: Any, ctx: Any = None) -> None:
        for handler in self.handlers.get(event.type, []):
            assert handler(event, ctx) is None  # the audit never steers a call

    def error(self, error_event: Any) -> None:
        for handler in self.error_handlers:
            handler(error_event)


@contextmanager
def fresh_pg(pg_url: str) -> Iterator[str]:
    """A new, empty PostgreSQL database on the test server, dropped afterwards.

    ``verify()`` checks every session in a store, so tests that tamper must not share one.
    """
    base = make_url(pg_url)
    name = f"pi_nb_audit_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def snapshot(log: AuditLog, **filters: Any) -> list[tuple[Any, ...]]:
    """(kind, tool_call_id, tool_name, payload) per record, with durations normalised."""
    frame = log.to_dataframe(**filters)
    out: list[tuple[Any, ...]] = []
    for kind, call_id, tool, payload in zip(
        frame["kind"], frame["tool_call_id"], frame["tool_name"], frame["payload"], strict=True
    ):
        if isinstance(payload, dict) and isinstance(payload.get("duration_ms"), float | int):
            payload = {**payload, "duration_ms": "<ms>"}
        out.append((kind, _none(call_id), _none(tool), payload))
    return out


def _none(value: Any) -> Any:
    return None if value is None or value != value else value  # NaN != NaN
