"""What a warehouse reached through its own DB-API-like client (not SQLAlchemy) adds to
:class:`~pi_notebook.sql.engines.direct.DirectBackend`, whose statement path it runs on
(Snowflake, BigQuery): the client's ``close`` and the warehouse's words (a read comes as a
stream of Arrow batches kept to the row cap and the byte bound by
:func:`~pi_notebook.sql.engines.rows.take_arrow`).

A warehouse has no transaction to try a write in and roll back here, so a write is measured
with the derived ``SELECT count(*)`` of :func:`~pi_notebook.sql.backend.derive.plan_write`
(run as a read), or the preview says plainly that its rows cannot be counted; an approval's
bounds are checked with the same count before the write runs. A stopped statement's error
is left as the worker says it.
"""

from __future__ import annotations

from pi_notebook.sql.engines.direct import DirectBackend

__all__ = ["WarehouseBackend"]


class WarehouseBackend(DirectBackend):
    """``query_database``'s backend for a warehouse reached through its own client (see the
    module docstring); a subclass names its ``backend`` and ``dialect`` and gives
    :class:`DirectBackend`'s hooks and ``close``."""

    no_transaction = "the warehouse has no transaction here to try the write and roll it back"
    no_rollback = None
    count_words = "SELECT count(*)"

    def close(self) -> None:
        """Close the client (blocking)."""
        raise NotImplementedError

    def dispose(self) -> None:
        """Stop the worker and close the client."""
        self._execution.close()
        self.close()
