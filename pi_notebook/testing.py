"""Test doubles that ship with the package: a strict scripted model and its step builders, and
a scripted approval UI."""

from .ai.scripted import ModelCall, ScriptedModel, UnexpectedModelCall, text, tool_call, turn
from .approvals.scripted import ScriptedApprovalUI

__all__ = [
    "ModelCall",
    "ScriptedApprovalUI",
    "ScriptedModel",
    "UnexpectedModelCall",
    "text",
    "tool_call",
    "turn",
]
