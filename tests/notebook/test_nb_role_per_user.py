"""``%config PiNotebook.role_per_user = True`` reaches the database extension: on PostgreSQL each
statement runs under the user's role (``tests/db/test_db_pg_roles.py``), any other engine
refuses it when the session is built."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from pi_notebook.notebook import current


async def test_role_per_user_on_a_sqlite_database_refuses_the_build(
    loaded: InteractiveShell,
) -> None:
    loaded.run_line_magic("config", "PiNotebook.role_per_user = True")
    with pytest.raises(UsageError, match="role_per_user needs PostgreSQL; sqlite"):
        current().build()
