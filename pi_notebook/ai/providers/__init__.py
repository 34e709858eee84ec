"""Real model providers, built on the official SDKs (the ``providers`` extra).

- :class:`OpenAIChatModel` (``openai_chat``): any OpenAI-compatible chat-completions
  server — OpenAI, Ollama, vLLM, llama.cpp's server, LM Studio.
- :class:`AnthropicModel` (``anthropic_messages``): Anthropic's Messages API.

Importing this package does not import either SDK; the classes load on first access.
Most code should go through :func:`pi_notebook.ai.resolve.resolve_model` instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .anthropic_messages import AnthropicModel
    from .openai_chat import OpenAIChatModel

__all__ = ["AnthropicModel", "OpenAIChatModel"]


def __getattr__(name: str) -> Any:
    if name == "OpenAIChatModel":
        from .openai_chat import OpenAIChatModel

        return OpenAIChatModel
    if name == "AnthropicModel":
        from .anthropic_messages import AnthropicModel

        return AnthropicModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
