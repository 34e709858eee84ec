"""``%pi_review``: the open four-eyes review requests of the kernel's review store, and a
reviewer's decision on one of them.

``%pi_review`` shows the open requests (``PiNotebook.review["url"]``, or ``--store URL``) as
cards with Approve / Reject (:class:`~.review_board.ReviewBoard`); ``%pi_review --list`` lists
them as a DataFrame (plain output, nbconvert); ``%pi_review --approve ID [--sql SQL]`` (approve, or approve the statement as
edited) and ``%pi_review --reject ID [--note TEXT]`` decide one as
:func:`~pi_notebook.identity.current_user` (an id may be shortened to a unique prefix of 6 or
more characters). A refusal (your own request, not on its list) or a request that is no
longer open is a ``UsageError`` that says so; the refusal is in the audit either way.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any, NoReturn

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class

from ..approvals.review import ReviewQueue
from ..errors import ReviewRefused, StateError
from ..identity import current_user
from ..secrets import safe_url
from .review_board import ReviewBoard
from .state import NotebookState

__all__ = ["MIN_PREFIX", "REVIEW_MAGIC_NAMES", "ReviewMagics"]

REVIEW_MAGIC_NAMES = ("pi_review",)
MIN_PREFIX = 6
_USAGE = "%pi_review [--list | --approve ID [--sql SQL] | --reject ID] [--note TEXT] [--store URL]"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}. Usage: {_USAGE}")


@magics_class
class ReviewMagics(Magics):
    """``%pi_review``: list and decide the review requests of the kernel's review store."""

    def __init__(self, shell: Any, state: NotebookState) -> None:
        super().__init__(shell)
        self.state = state
        self._queues: dict[str, ReviewQueue] = {}

    def _queue(self, store: str | None) -> ReviewQueue:
        url = store or self.state.config.review.get("url")
        if not isinstance(url, str) or not url:
            raise UsageError(
                "No review store: set %config PiNotebook.review = {'url': STORE, "
                "'reviewers': [...]} or pass --store URL."
            )
        if url not in self._queues:
            try:
                self._queues[url] = ReviewQueue(url)
            except Exception as exc:
                raise UsageError(
                    f"The review store {safe_url(url)} cannot be reached ({type(exc).__name__})."
                ) from None
        return self._queues[url]

    @line_magic
    def pi_review(self, line: str) -> Any:
        """Open review requests as cards to decide (``--list``: a DataFrame); ``--approve ID`` /
        ``--reject ID`` decides one."""
        parser = _Parser(prog="%pi_review", usage=_USAGE, add_help=False, allow_abbrev=False)
        group = parser.add_mutually_exclusive_group()
        group.add_argument("--list", action="store_true")
        group.add_argument("--approve", metavar="ID")
        group.add_argument("--reject", metavar="ID")
        parser.add_argument("--note")
        parser.add_argument("--sql", help="approve the statement as edited")
        parser.add_argument("--store", metavar="URL")
        try:
            args = parser.parse_args(shlex.split(line))
        except ValueError as exc:
            raise UsageError(f"{exc}. Usage: {_USAGE}") from None
        queue = self._queue(args.store)
        wanted = args.approve or args.reject
        if wanted is None:
            if args.note is not None or args.sql is not None:
                raise UsageError(f"--note and --sql go with a decision. Usage: {_USAGE}")
            return queue.to_dataframe() if args.list else ReviewBoard(queue)
        if args.sql is not None and not args.approve:
            raise UsageError(f"--sql goes with --approve (an edit is approved). Usage: {_USAGE}")
        request_id = self._resolve(queue, wanted)
        decision = "approved" if args.approve else "rejected"
        me = current_user()
        try:
            edit = {"sql": args.sql} if args.sql is not None else None
            decided = queue.decide(request_id, decision, me, note=args.note, edited_args=edit)
        except (ReviewRefused, StateError) as exc:
            raise UsageError(str(exc)) from None
        what = decided.args.get("sql", decided.tool_name)
        print(
            f"{decision.capitalize()} review request {decided.request_id} as {me} "
            f"({decided.requester}'s {decided.tool_name}: {what})."
        )
        return None

    def _resolve(self, queue: ReviewQueue, wanted: str) -> str:
        if queue.get(wanted) is not None:
            return wanted
        if len(wanted) >= MIN_PREFIX:
            matches = [r.request_id for r in queue.pending() if r.request_id.startswith(wanted)]
            if len(matches) == 1:
                return matches[0]
            if len(matches) > 1:
                raise UsageError(
                    f"{wanted!r} matches {len(matches)} open requests: give more "
                    "of the id (see %pi_review)."
                )
        raise UsageError(f"No review request {wanted!r} in this store (see %pi_review).")

    def close(self) -> None:
        """Close the stores this magic opened."""
        for queue in self._queues.values():
            queue.close()
        self._queues.clear()
