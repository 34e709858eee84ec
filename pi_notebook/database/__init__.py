"""The database extension: ``query_database`` with an approval gate (chapter §5, §14, §15).

Read-only SQL runs at once. Anything that writes or has a side effect needs the user's
approval; the approval is stored durably and becomes a one-shot capability for this call id
and the canonical hash of the arguments shown. The backend checks again on the SQL it is
about to run (the gate is intent, the backend is authorisation).

It also registers ``describe_database`` and a schema summary for the system prompt, and with
``data_policy=`` protects columns by lineage in what the model sees (see the README).

``register(pi)`` is the default factory (``PI_NOTEBOOK_DATABASE_URL``, else the bundled sample
database); ``database_extension(url=..., **options)`` builds one for a given database;
``engines()`` lists the engines a URL may name, with each one's backstop and cancel.
``extensions/database.py`` re-exports ``register`` so the extension also loads by path.
"""

from pi_notebook.database.describe import DescribeDatabaseParams
from pi_notebook.database.engines import engines
from pi_notebook.database.extension import (
    DatabaseExtension,
    QueryDatabaseParams,
    database_extension,
    register,
)
from pi_notebook.database.policy import DataPolicy, load_policy
from pi_notebook.database.semantic import SemanticLayer, load_semantic, sample_semantic_path
from pi_notebook.database.views import call_views, query_call_view

__all__ = [
    "DataPolicy",
    "DatabaseExtension",
    "DescribeDatabaseParams",
    "QueryDatabaseParams",
    "SemanticLayer",
    "call_views",
    "database_extension",
    "engines",
    "load_policy",
    "load_semantic",
    "query_call_view",
    "register",
    "sample_semantic_path",
]
