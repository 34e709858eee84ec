"""How a message crosses between the kernel and an engine's worker process (see
:mod:`.engine_process`): pickled (protocol 5), with the large buffers of a result (NumPy
arrays, Arrow buffers) sent after it as they are, out of band, instead of being copied
into the pickle and out of it again. A 1M-row result's strings cost about 25 ms to pickle
in band, under 1 ms out of band.

On the wire, a message without large buffers is one frame (its pickle); one with them is
``("buffers", [sizes])``, then each buffer, then the pickle. The receiver reads each buffer
into a ``bytearray`` of its own, so the arrays built on it are writable, like any DataFrame's.
"""

from __future__ import annotations

import pickle
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["KILL_AFTER_S", "OUT_OF_BAND_AT", "receive_message", "send_message"]

KILL_AFTER_S = 2.0
"""Seconds a worker may take to answer a cancel before it is killed."""

OUT_OF_BAND_AT = 1 << 16
"""Buffers of at least this many bytes go out of band."""
_BUFFERS = "buffers"


def send_message(conn: Connection, message: Any) -> None:
    """Send ``message`` on ``conn`` (blocking).

    Raises:
        OSError, EOFError: the other end is gone.
        Exception: ``message`` cannot be pickled (a ``MemoryError`` among them).
    """
    buffers: list[memoryview] = []

    def keep(buffer: pickle.PickleBuffer) -> bool:
        try:
            raw = buffer.raw()
        except BufferError:  # not contiguous: in band
            return True
        if raw.nbytes < OUT_OF_BAND_AT:
            return True
        buffers.append(raw)
        return False

    data = pickle.dumps(message, protocol=5, buffer_callback=keep)
    if not buffers:
        conn.send_bytes(data)
        return
    conn.send_bytes(pickle.dumps((_BUFFERS, [raw.nbytes for raw in buffers])))
    for raw in buffers:
        conn.send_bytes(raw)
    conn.send_bytes(data)


def receive_message(conn: Connection) -> Any:
    """The next message on ``conn`` (blocking until all of it arrived).

    Raises:
        EOFError, OSError: the other end is gone.
    """
    message = pickle.loads(conn.recv_bytes())
    if not (isinstance(message, tuple) and message and message[0] == _BUFFERS):
        return message
    buffers: list[bytearray] = []
    for size in message[1]:
        buffer = bytearray(size)
        conn.recv_bytes_into(buffer)
        buffers.append(buffer)
    return pickle.loads(conn.recv_bytes(), buffers=buffers)
