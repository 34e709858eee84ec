"""``ToolChoices``: the tools a person turned on and off with ``%pi_tools``.

The choices outlive the session they were made in: every session the notebook builds later
(after ``%config``, ``%pi_model``, ``%pi_connect``...) starts from its own active set with
them applied, so a rebuild never brings back a tool the person turned off.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..session import AgentSession

__all__ = ["ToolChoices"]


class ToolChoices:
    """The tools turned on (in the order chosen) and off, for this kernel's sessions."""

    def __init__(self) -> None:
        self.on: list[str] = []
        self.off: set[str] = set()

    def choose(
        self, activate: Sequence[str], deactivate: Sequence[str], session: AgentSession | None
    ) -> None:
        """Remember ``%pi_tools --activate/--deactivate`` and apply it to ``session`` now."""
        for name in activate:
            self.off.discard(name)
            if name not in self.on:
                self.on.append(name)
        for name in deactivate:
            self.off.add(name)
            if name in self.on:
                self.on.remove(name)
        if session is not None:
            active = [n for n in session.active_tool_names if n not in deactivate]
            active += [n for n in activate if n not in active]
            session.set_active_tools_by_name(active)

    def apply(self, session: AgentSession) -> None:
        """Apply every choice so far to a newly built ``session`` (nothing if none was made)."""
        if not self.on and not self.off:
            return
        active = [n for n in session.active_tool_names if n not in self.off]
        active += [n for n in self.on if n not in active and n in session.tool_registry]
        session.set_active_tools_by_name(active)
