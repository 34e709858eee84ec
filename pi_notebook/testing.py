"""Test doubles that ship with the package: a strict scripted model and its step builders."""

from .ai.scripted import ModelCall, ScriptedModel, UnexpectedModelCall, text, tool_call, turn

__all__ = ["ModelCall", "ScriptedModel", "UnexpectedModelCall", "text", "tool_call", "turn"]
