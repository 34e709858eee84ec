"""``PiNotebook``: the notebook's settings, as a traitlets ``Configurable``.

Set them with ``%config PiNotebook.model = "openai:gpt-4o-mini"`` (or in an IPython profile);
a change applies from the next ``%%pi`` cell. Secrets stay in environment variables.
"""

from __future__ import annotations

from traitlets import Bool, Dict, Float, Int, List, Unicode
from traitlets.config import Configurable

__all__ = ["PiNotebook"]


class PiNotebook(Configurable):
    """Settings of the pi_notebook IPython extension."""

    model = Unicode(
        "offline", help="Model: 'offline', 'openai:<model-id>' or 'anthropic:<model-id>'."
    ).tag(config=True)
    database_url = Unicode(
        "",
        help="URL of the database (any engine of pi_notebook.database.engines()); empty means "
        "PI_NOTEBOOK_DATABASE_URL or the sample.",
    ).tag(config=True)
    audit_url = Unicode(
        "", help="SQLAlchemy URL of the audit log; empty means the default file."
    ).tag(config=True)
    approval_timeout = Float(
        300.0,
        help="Seconds an approval prompt waits for a person's decision before it expires "
        "(no decision counts as a rejection).",
    ).tag(config=True)
    review = Dict(
        help="Four-eyes review of writes: {'url': STORE, 'reviewers': ['ana', 'bo'], "
        "'timeout_s': 600}; writes wait for a reviewer's decision in that store (the team's "
        "audit database), and %pi_review lists and decides its open requests. Empty: none.",
    ).tag(config=True)
    role_per_user = Bool(
        False,
        help="PostgreSQL: run each statement under SET LOCAL ROLE to the user's own database "
        "role (the user's name), so the database's privileges apply per person.",
    ).tag(config=True)
    row_cap = Int(10_000, help="Rows kept in each result DataFrame.").tag(config=True)
    statement_timeout = Float(30.0, help="Seconds a statement may run before it is cancelled.").tag(
        config=True
    )
    memory_limit_bytes = Int(
        None,
        allow_none=True,
        help="The most memory a statement may use where the engine runs (DuckDB, chDB: its worker "
        "process; SQLite: its heap limit); past it the call ends with an error and the kernel "
        "and its variables survive. None: half the machine's memory, at most 4 GiB.",
    ).tag(config=True)
    extensions = List(Unicode(), help="More extensions: .py paths or module names.").tag(
        config=True
    )
    allowed_tools = List(
        Unicode(),
        default_value=None,
        allow_none=True,
        help="When set, only these tool names reach the registry.",
    ).tag(config=True)
    excluded_tools = List(
        Unicode(), help="Tool names kept out of the registry (wins over allowed_tools)."
    ).tag(config=True)
    mcp_servers = Dict(
        help="MCP servers whose tools the session offers, {name: {command, args, env} or "
        "{url, headers}} (docs/mcp.md); also read from pi_notebook_mcp.json in the Jupyter "
        "config directory. %pi_mcp add/remove change it.",
    ).tag(config=True)
