"""Starting and stopping an engine's worker process (see :mod:`.engine_process`): the
process itself, its two socket pairs, and the default memory cap."""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from pi_notebook.sql.backend.engines import DUCKDB_MEMORY_ENV

__all__ = ["close_quietly", "default_memory_limit", "spawn", "stop_all"]

_GIB = 1 << 30
_DUCKDB_SHARE = 0.6  # DuckDB's own memory_limit, as a share of the process cap


def default_memory_limit() -> int:
    """The default ``memory_limit_bytes``: half the machine's physical memory, at most 4 GiB."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not a POSIX system
        return 4 * _GIB
    return min(4 * _GIB, physical // 2)


def spawn(
    setup: dict[str, Any], cwd: str
) -> tuple[subprocess.Popen[bytes], Connection, Connection, tuple[Any, ...]]:
    """Start a worker (``python -m ...engine_child``), send it ``setup`` and wait for its
    hello, at most the engine's connect timeout (``setup["connect_timeout_s"]``: the
    worker's start is bounded by it, not by the statement timeout). Returns the process, the
    calls' and the cancels' connections, and the hello: ``("ready",)``, ``("fatal", text)``
    or ``("late", "")`` (no hello in time); the process is then already stopped."""
    ours, theirs = socket.socketpair()
    ours_control, theirs_control = socket.socketpair()
    env = dict(os.environ)
    # The kernel's own import path: a function offloaded to the worker is imported there.
    paths = [str(Path(__file__).resolve().parents[3]), *(p for p in sys.path if p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    memory = int(setup["memory_limit_bytes"])
    if DUCKDB_MEMORY_ENV not in env and memory > 0:
        env[DUCKDB_MEMORY_ENV] = f"{max(int(memory * _DUCKDB_SHARE) >> 20, 64)}MB"
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pi_notebook.sql.backend.engine_child",
                str(theirs.fileno()),
                str(theirs_control.fileno()),
            ],
            pass_fds=(theirs.fileno(), theirs_control.fileno()),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
            cwd=cwd,
        )
    except BaseException:
        ours.close()
        ours_control.close()
        raise
    finally:
        theirs.close()
        theirs_control.close()
    conn, control = Connection(ours.detach()), Connection(ours_control.detach())
    try:
        conn.send_bytes(pickle.dumps(setup))
        ready = conn.poll(float(setup["connect_timeout_s"]))
        hello = pickle.loads(conn.recv_bytes()) if ready else ("late", "")
    except (EOFError, OSError):
        hello = ("fatal", "")
    if hello[0] != "ready":
        proc.kill()
        proc.wait()
        conn.close()
        control.close()
    return proc, conn, control, hello


def close_quietly(conn: Connection | None) -> None:
    if conn is not None:
        try:
            conn.close()
        except OSError:  # already closed (at interpreter exit)
            pass


def stop_all(procs: list[subprocess.Popen[bytes] | None]) -> None:
    """Kill and reap the processes still running."""
    for proc in procs:
        if proc is not None and proc.poll() is None:
            proc.kill()
        if proc is not None:
            proc.wait()
