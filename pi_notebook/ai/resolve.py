"""Turn the ``model`` a user passes (a string or a model object) into a :class:`Model`.

Accepted strings: ``"offline"`` (the embedded demo model), ``"openai:<model-id>"`` and
``"anthropic:<model-id>"``. Provider SDKs are optional extras, imported only here and
only when their string is used, so ``import pi_notebook`` never needs them.
"""

from __future__ import annotations

from ..errors import ModelSpecError
from .model import Model

__all__ = ["ModelSpecError", "resolve_model"]

ACCEPTED = "'offline', 'openai:<model-id>', 'anthropic:<model-id>', or a model object"
_EXTRA_HINT = 'pip install "pi-notebook[providers]"'


def resolve_model(spec: str | Model) -> Model:
    """The model for ``spec``.

    Args:
        spec: a :class:`Model` (returned as is) or one of ``"offline"``,
            ``"openai:<model-id>"`` (reads ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``),
            ``"anthropic:<model-id>"`` (reads ``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``).

    Raises:
        ModelSpecError: for an unknown string, a missing model id, or a provider whose
            SDK is not installed. A missing API key is not an error here: the model's
            first answer reports it, so a notebook can set the key afterwards.
    """
    if not isinstance(spec, str):
        if isinstance(spec, Model):  # pyright: ignore[reportUnnecessaryIsInstance] - untyped callers
            return spec
        raise ModelSpecError(f"model must be {ACCEPTED}; got a {type(spec).__name__}.")
    text = spec.strip()
    if text == "offline":
        from .offline import OfflineModel

        return OfflineModel()
    prefix, colon, model_id = text.partition(":")
    prefix = prefix.strip().lower()
    model_id = model_id.strip()  # Ollama ids contain colons too: "openai:llama3.1:8b"
    if colon and prefix in ("openai", "anthropic"):
        if not model_id:
            example = "gpt-4o-mini" if prefix == "openai" else "claude-sonnet-4-5"
            raise ModelSpecError(f"{spec!r} has no model id; write e.g. '{prefix}:{example}'.")
        if prefix == "openai":
            try:
                from .providers.openai_chat import OpenAIChatModel
            except ImportError as exc:
                raise _missing_sdk("openai", exc) from exc
            return OpenAIChatModel(model_id)
        try:
            from .providers.anthropic_messages import AnthropicModel
        except ImportError as exc:
            raise _missing_sdk("anthropic", exc) from exc
        return AnthropicModel(model_id)
    raise ModelSpecError(f"Unknown model {spec!r}: use {ACCEPTED}.")


def _missing_sdk(package: str, exc: ImportError) -> Exception:
    if exc.name != package and not (exc.name or "").startswith(f"{package}."):
        return exc  # some other import broke: not a missing extra, so do not hide it
    return ModelSpecError(
        f"The {package!r} package is needed for '{package}:<model-id>' models: {_EXTRA_HINT}"
    )
