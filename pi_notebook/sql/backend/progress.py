"""Progress of a job that has no row count yet (a Spark job's stages and tasks).

A backend's :data:`~pi_notebook.sql.backend.ProgressCallback` is called with the rows
fetched so far; an engine that computes the whole result before the first row comes (Spark)
reports its job instead, as a :class:`JobProgress`: an ``int`` (the tasks done) that also
says what it counts, so a listener that only knows rows still gets a number.
"""

from __future__ import annotations

__all__ = ["JobProgress"]


class JobProgress(int):
    """The tasks a running job has finished (the ``int`` value), of ``tasks`` known so far,
    and the bytes its stages have read."""

    tasks: int
    bytes_read: int

    def __new__(cls, done: int, *, tasks: int, bytes_read: int) -> JobProgress:
        made = super().__new__(cls, done)
        made.tasks = tasks
        made.bytes_read = bytes_read
        return made

    def text(self) -> str:
        """``Running: 3 of 8 tasks done, 12.0 MB read…``."""
        read = f", {self.bytes_read / 1e6:,.1f} MB read" if self.bytes_read else ""
        return f"Running: {int(self):,} of {self.tasks:,} tasks done{read}…"

    def details(self) -> dict[str, int | str]:
        """``{"phase": "job", "tasks_done", "tasks", "bytes_read"}`` for a tool update."""
        return {
            "phase": "job",
            "tasks_done": int(self),
            "tasks": self.tasks,
            "bytes_read": self.bytes_read,
        }
