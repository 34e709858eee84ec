"""The magics: thin parsers over :class:`~.state.NotebookState`.

Every mistake is a ``UsageError`` (IPython shows it as one line, no traceback) that says what
to do; the kernel and the session are left as they were.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any, NoReturn

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from ..secrets import safe_url
from .connect import check_database_url, probe_database
from .magic_frames import find_result, grants_frame, tools_frame
from .prompts import ApprovalPrompt
from .state import NotebookState

__all__ = ["PiMagics"]


class _Parser(argparse.ArgumentParser):
    def __init__(self, usage: str) -> None:
        super().__init__(prog=usage.split()[0], usage=usage, add_help=False, allow_abbrev=False)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}. Usage: {self.usage}")


def _parse(parser: _Parser, line: str) -> argparse.Namespace:
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"{exc}. Usage: {parser.usage}") from None
    return parser.parse_args(words)


@magics_class
class PiMagics(Magics):
    """``%%pi``, ``%pi_tools``, ``%pi_audit``, ``%pi_approvals``, ``%pi_abort``, ``%pi_reset``,
    ``%pi_model``, ``%pi_connect``, ``%pi_extension``, ``%pi_result`` and ``%pi_mcp``."""

    def __init__(self, shell: Any, state: NotebookState) -> None:
        super().__init__(shell)
        self.state = state

    def _idle(self, what: str) -> None:
        if self.state.active_run is not None:
            raise UsageError(
                f"A %%pi run is still going: wait for it, press Stop or run %pi_abort, then {what}."
            )

    def _say_rebuilt(self) -> None:
        """Print what a rebuild kept and dropped, if one replaced the session."""
        note = self.state.take_rebuild_note()
        if note is not None:
            print(note)

    def _rebuild(self, **changes: Any) -> None:
        """Rebuild the session (with ``changes`` to the settings); on failure nothing changes."""
        from ..ai.resolve import ModelSpecError

        try:
            self.state.reconfigure(**changes)
        except ModelSpecError as exc:
            raise UsageError(
                f"{exc} Set it with %pi_model offline (or openai:<id>, anthropic:<id>)."
            ) from None

    # -- prompt -------------------------------------------------------------------
    @cell_magic
    def pi(self, line: str, cell: str) -> None:
        """Send the cell to the agent.

        In a kernel the cell is rewritten to await its run (see :mod:`.cell`), so it stays
        busy until the run settles; called as a magic (``%%pi --background``, or where
        awaiting is not possible) it starts the run and returns at once.
        """
        self.state.start_cell_run(line, cell, background=True)

    @line_magic
    def pi_abort(self, line: str) -> None:
        """Stop the run that is going (the Stop button does the same)."""
        _parse(_Parser("%pi_abort"), line)
        run = self.state.active_run
        if run is None:
            print("No run is going.")
            return
        run.abort()
        print("Stopping the run.")

    @line_magic
    def pi_reset(self, line: str) -> None:
        """Start a new conversation: the model forgets earlier cells; the session stays."""
        _parse(_Parser("%pi_reset"), line)
        print(self.state.reset_conversation())

    # -- registry -------------------------------------------------------------------
    @line_magic
    def pi_tools(self, line: str) -> Any:
        """The tool registry and active set as a DataFrame; ``--activate/--deactivate NAME``."""
        parser = _Parser("%pi_tools [--activate NAME] [--deactivate NAME]")
        parser.add_argument("--activate", action="append", default=[], metavar="NAME")
        parser.add_argument("--deactivate", action="append", default=[], metavar="NAME")
        args = _parse(parser, line)
        if self.state.stale:
            self._rebuild()
            self._say_rebuilt()
        session = self.state.current_session()
        registry = session.tool_registry
        for name in [*args.activate, *args.deactivate]:
            if name not in registry:
                raise UsageError(
                    f"No tool named {name!r}: pick one of {', '.join(registry)} (see %pi_tools)."
                )
        if args.activate or args.deactivate:
            self.state.choose_tools(args.activate, args.deactivate)
        return tools_frame(registry, session.active_tool_names)

    # -- records -------------------------------------------------------------------
    @line_magic
    def pi_audit(self, line: str) -> Any:
        """Audit records as a DataFrame (this notebook's session unless ``--all`` or ``--user``:
        one person's records are looked up across every session of the store)."""
        parser = _Parser(
            "%pi_audit [--tool NAME] [--call ID] [--kind KIND] [--since TIME] [--user NAME] [--all] "
            "[--calls] "
            "[--verify-notebook PATH]"
        )
        parser.add_argument("--verify-notebook", metavar="PATH")
        for option in ("--tool", "--call", "--kind", "--since", "--user"):
            parser.add_argument(option)
        parser.add_argument("--all", action="store_true")
        parser.add_argument("--calls", action="store_true", help="one row per call")
        args = _parse(parser, line)
        audit = self.state.audit
        if audit is None:
            raise UsageError("No audit log: run %load_ext pi_notebook first.")
        if args.verify_notebook is not None:
            return self._verify_notebook(args.verify_notebook, audit)
        session = None if args.all or args.user is not None else audit.session_id
        if args.calls:
            return audit.calls_dataframe(session=session)
        try:
            return audit.to_dataframe(
                session=session,
                tool=args.tool,
                tool_call_id=args.call,
                since=args.since,
                kind=args.kind,
                user=args.user,
            )
        except ValueError as exc:
            raise UsageError(
                f"{exc}; give --since as an ISO time such as 2024-05-01T12:00"
            ) from None

    def _verify_notebook(self, path_text: str, audit: Any) -> None:
        from ..audit import verify_notebook

        path = Path(path_text).expanduser()
        if not path.is_file():
            raise UsageError(f"No notebook at {path}: give the path of a saved .ipynb file.")
        try:
            report = verify_notebook(path, audit)
        except Exception as exc:
            raise UsageError(f"{path.name} cannot be verified: {exc}") from None
        print(report)  # the verdict, then each problem once

    @line_magic
    def pi_approvals(self, line: str) -> Any:
        """Approval decisions (durable records plus prompts still open) as a DataFrame."""
        import pandas as pd

        parser = _Parser("%pi_approvals [--all]")
        parser.add_argument("--all", action="store_true")
        args = _parse(parser, line)
        frame = (
            self.state.database.approvals.to_dataframe() if self.state.database else pd.DataFrame()
        )
        if not args.all and self.state.audit is not None and "session_id" in frame:
            frame = frame[frame["session_id"] == self.state.audit.session_id]
        pending = [
            {
                "tool_call_id": p.tool_call_id,
                "decision": "pending",
                "sql": p.sql,
                "timestamp": pd.Timestamp(p.requested_at, unit="s", tz="UTC"),
            }
            for p in self.state.ui.prompts
            if isinstance(p, ApprovalPrompt) and not p.decided
        ]
        if pending:
            frame = pd.concat([frame, pd.DataFrame(pending)], ignore_index=True)
        if frame.empty:
            print("No approval decisions yet.")
        return frame.reset_index(drop=True)

    @line_magic
    def pi_result(self, line: str) -> Any:
        """A call's result DataFrame (default: the latest); ``-o VAR`` also stores it."""
        parser = _Parser("%pi_result [CALL_ID] [-o VAR]")
        parser.add_argument("call_id", nargs="?")
        parser.add_argument("-o", "--out", metavar="VAR")
        args = _parse(parser, line)
        if args.out is not None and not args.out.isidentifier():
            raise UsageError(f"{args.out!r} is not a variable name: use e.g. -o df.")
        found = find_result(self.state.runs, args.call_id, self.state.keep_results)
        if args.out is not None and self.shell is not None:
            self.shell.user_ns[args.out] = found
        return found

    @line_magic
    def pi_grants(self, line: str) -> Any:
        """The scoped grants in force as a DataFrame; ``--revoke ID`` ends one now."""
        parser = _Parser("%pi_grants [--revoke ID]")
        parser.add_argument("--revoke", metavar="ID")
        args = _parse(parser, line)
        grants = getattr(self.state.database, "grants", None)
        if grants is None:
            raise UsageError("This database extension keeps no grants.")
        if args.revoke is not None:
            if not grants.revoke(args.revoke):
                known = ", ".join(g.grant_id for g in grants.list()) or "none"
                raise UsageError(f"No grant {args.revoke!r} in force (in force: {known}).")
            print(f"Revoked grant {args.revoke}: its statements need approval again.")
        frame = grants_frame(grants.list())
        if frame.empty:
            print("No grants in force.")
        return frame

    @line_magic
    def pi_usage(self, line: str) -> Any:
        """Tokens in and out and cost, per session of this kernel (the current one last)."""
        _parse(_Parser("%pi_usage"), line)
        self.state.current_session()
        return self.state.usage_frame()

    # -- configuration -------------------------------------------------------------
    @line_magic
    def pi_model(self, line: str) -> None:
        """Show the model, or switch to ``offline`` / ``openai:<id>`` / ``anthropic:<id>``."""
        from ..ai.resolve import ModelSpecError, resolve_model

        parser = _Parser("%pi_model [offline | openai:<id> | anthropic:<id>]")
        parser.add_argument("spec", nargs="?")
        args = _parse(parser, line)
        if args.spec is None:
            print(f"model: {self.state.current_session().model_name}")
            return
        self._idle("switch the model")
        try:
            resolve_model(args.spec)
        except ModelSpecError as exc:
            raise UsageError(f"{exc} Try %pi_model offline.") from None
        override, self.state.model_override = self.state.model_override, None
        try:
            self._rebuild(model=args.spec)
        except BaseException:
            self.state.model_override = override
            raise
        print(self.state.status_line())
        self._say_rebuilt()

    @line_magic
    def pi_connect(self, line: str) -> None:
        """Point the database extension at a URL the tool runs (any engine of
        ``pi_notebook.database.engines()``), checked by :mod:`.connect` first."""
        parser = _Parser("%pi_connect URL")
        parser.add_argument("url")
        args = _parse(parser, line)
        self._idle("connect")
        kept = (
            f"; still connected to {safe_url(self.state.database_url)}"
            if self.state.database_url
            else ""
        )
        try:
            url = check_database_url(args.url)
            probe_database(url)
        except ValueError as exc:
            raise UsageError(f"{exc}{kept}.") from None
        self._rebuild(database_url=url)
        print(self.state.status_line())
        self._say_rebuilt()

    @line_magic
    def pi_extension(self, line: str) -> None:
        """Load another extension file (``.py`` with a module-level ``register(pi)``)."""
        parser = _Parser("%pi_extension PATH")
        parser.add_argument("path")
        args = _parse(parser, line)
        self._idle("load the extension")
        path = Path(args.path).expanduser().resolve()
        if not path.is_file():
            raise UsageError(
                f"No file at {path}: give the path of a .py file that defines register(pi)."
            )
        before = list(self.state.config.extensions)
        self._rebuild(extensions=[*before, str(path)])
        session = self.state.current_session()
        problems = [
            d for d in session.diagnostics if d.extension_path == str(path) and d.level == "error"
        ]
        if problems:
            self._rebuild(extensions=before)
            raise UsageError(f"{problems[0].message}; fix {path.name} and run %pi_extension again.")
        tools = [n for n, t in session.tool_registry.items() if t.source_info.path == str(path)]
        print(f"Loaded {path.name}: tools {', '.join(tools) or '(none)'}.")
        self._say_rebuilt()

    @line_magic
    def pi_mcp(self, line: str) -> Any:
        """MCP servers: ``%pi_mcp add NAME -- COMMAND ARGS...``, ``%pi_mcp list``,
        ``%pi_mcp remove NAME`` (docs/mcp.md)."""
        from ..errors import ConfigurationError

        try:
            from ..mcp.magic import run_mcp_magic
        except ImportError as exc:
            raise UsageError(str(exc)) from None

        def apply(servers: dict[str, Any]) -> None:
            self._idle("change the MCP servers")
            self._rebuild(mcp_servers=servers)

        self.state.current_session()  # the first build reads the config file's servers
        try:
            result = run_mcp_magic(
                line,
                dict(self.state.config.mcp_servers),
                apply=apply,
                extension=lambda: getattr(self.state, "mcp", None),
            )
        except ConfigurationError as exc:
            raise UsageError(str(exc)) from None
        if isinstance(result, str):
            print(result)
            self._say_rebuilt()
            return None
        self._say_rebuilt()
        return result
