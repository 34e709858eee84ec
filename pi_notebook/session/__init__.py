"""The agent session (layer 4): registry, active set, system prompt, hooks."""

from .factory import create_agent_session
from .session import AgentSession, SessionClosedError

__all__ = ["AgentSession", "SessionClosedError", "create_agent_session"]
