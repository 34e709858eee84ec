"""Which engine worker process each backend uses: one per DuckDB file or chDB directory in a
kernel, shared by every backend on it (chDB holds one database per process), and a new one for
an in-memory database. Each backend holds a share from :func:`shared_process`; its
``dispose`` gives it back (:func:`dispose_share`), a collected backend that never disposed too
(:func:`release_process`); the worker stops with the last share.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy.engine import URL

from pi_notebook.sql.backend.engine_process import EngineProcess, in_memory

__all__ = ["dispose_share", "release_process", "shared_process"]


_SHARED: dict[str, EngineProcess] = {}
_SHARED_LOCK = threading.Lock()


def shared_process(url: URL, **options: Any) -> EngineProcess:
    """The worker of the database at ``url`` for this kernel: one per DuckDB file or chDB
    directory (a second backend on the same one shares the first one's worker and its memory
    limit); a new one for an in-memory database. Give it back with :func:`release_process`."""
    if in_memory(url):
        process = EngineProcess(url, **options)
        process.users = 1
        return process
    key = url.render_as_string(hide_password=False)
    with _SHARED_LOCK:
        process = _SHARED.get(key)
        if process is None:
            process = _SHARED[key] = EngineProcess(url, **options)
        process.users += 1
    return process


def dispose_share(process: EngineProcess, *, held: bool) -> None:
    """A backend's ``dispose``: its share of ``process`` (``held``: not given back by an
    earlier dispose) goes back at once, not when a collection finds the backend; the worker
    stops when no share is left, else its pool is released and it runs on for the others. A
    disposed backend used again runs its worker without a share: its next dispose stops it
    when no other backend holds one."""
    if not _give_back(process, held=held):
        process.release_pool()


def release_process(process: EngineProcess) -> None:
    """One backend is done with ``process``; the last one stops it."""
    _give_back(process, held=True)


def _give_back(process: EngineProcess, *, held: bool) -> bool:
    """Count ``held`` share of ``process`` back; with none left, forget and stop it (``True``)."""
    with _SHARED_LOCK:
        if held:
            process.users = max(0, process.users - 1)
        if process.users > 0:
            return False
        _forget(process)
    process.close()
    return True


def _forget(process: EngineProcess) -> None:
    """Take ``process`` out of the registry (under its lock): the database's next backend
    gets a worker of its own options."""
    for key, value in list(_SHARED.items()):
        if value is process:
            del _SHARED[key]
