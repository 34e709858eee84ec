"""The kernel's stand-in for an engine that lives in a worker process (see
:mod:`.engine_process`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import URL

__all__ = ["WorkerEngine"]


class WorkerEngine:
    """Stands in the kernel for the engine that lives in the worker: it carries the URL and
    the dialect's name, and a function offloaded to the worker with it as an argument gets
    the worker's own engine (it unpickles to :func:`.engine_child.current_engine`). Any other
    use fails: the kernel never opens the database."""

    def __init__(self, url: URL) -> None:
        self.url = url
        self.name = url.get_backend_name()

    @property
    def dialect(self) -> Any:
        return _Dialect(self.name)

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        from pi_notebook.sql.backend import engine_child

        return (engine_child.current_engine, ())

    def dispose(self) -> None:
        """Nothing to close here (the worker owns the connections)."""

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"{self.name} runs in its worker process; the kernel has no "
            f"{name!r} for it (offload the work with backend.offload)"
        )


class _Dialect:
    def __init__(self, name: str) -> None:
        self.name = name
