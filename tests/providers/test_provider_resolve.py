"""resolve_model: model strings and objects -> models, and its errors."""

from __future__ import annotations

import sys

import pytest

from pi_notebook.ai.model import Model
from pi_notebook.ai.providers.anthropic_messages import AnthropicModel
from pi_notebook.ai.providers.openai_chat import OpenAIChatModel
from pi_notebook.ai.providers.retry import RetryPolicy
from pi_notebook.ai.resolve import ModelSpecError, resolve_model


def test_provider_strings_build_models(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    openai_model = resolve_model("openai:llama3.1:8b")  # Ollama ids contain colons
    assert isinstance(openai_model, OpenAIChatModel) and isinstance(openai_model, Model)
    assert (openai_model.id, openai_model.provider) == ("llama3.1:8b", "openai")
    anthropic_model = resolve_model("anthropic:claude-sonnet-4-5")
    assert isinstance(anthropic_model, AnthropicModel) and anthropic_model.provider == "anthropic"
    assert resolve_model(openai_model) is openai_model


def test_offline_string():
    model = resolve_model("offline")
    assert isinstance(model, Model) and type(model).__name__ == "OfflineModel"


@pytest.mark.parametrize("spec", ["gpt-4o", "openai:", "mistral:large", "", 42])
def test_bad_specs_name_the_accepted_forms(spec):
    with pytest.raises(ModelSpecError) as info:
        resolve_model(spec)
    assert isinstance(info.value, ValueError)
    assert "openai:" in str(info.value)


def test_missing_sdk_names_the_extra(monkeypatch):
    monkeypatch.delitem(sys.modules, "pi_notebook.ai.providers.openai_chat")
    monkeypatch.setitem(sys.modules, "openai", None)  # makes `import openai` fail
    with pytest.raises(ModelSpecError, match=r'pip install "pi-notebook\[providers\]"'):
        resolve_model("openai:gpt-4o")


def test_retry_policy_backoff_and_retry_after():
    policy = RetryPolicy(max_retries=3, base_delay_s=1.0, max_delay_s=5.0)
    assert 0.75 <= policy.delay(1) <= 1.25 and 1.5 <= policy.delay(2) <= 2.5
    assert policy.delay(10) == 5.0  # capped
    assert policy.delay(1, retry_after_s=0.3) == 0.3  # the server's wait wins...
    assert policy.delay(1, retry_after_s=600) == 5.0  # ...up to the cap
