"""Questions the agent asks the user, as widgets: approval, choice and text prompts.

A prompt is answered once: by a button click, by its method (``approve()``, ``reject()``,
``choose()``, ``submit()``, ``cancel()``) so scripts and tests can drive it, by its deadline
(``expired``) or by the run's abort signal (``aborted``). Afterwards every control is
disabled. ``wait()`` is what the UI adapter awaits; the buttons resolve it, so the kernel
must stay free to receive clicks (the ``%%pi`` cell has returned long before).

The base class is :mod:`.prompt_widget`, the approval prompt :mod:`.approval_prompt`; their
names are re-exported here, beside the choice and text prompts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets

from .approval_prompt import ApprovalPrompt, GrantForm, preview_html
from .prompt_widget import Prompt, PromptAnswer, button

__all__ = [
    "ApprovalPrompt",
    "ChoicePrompt",
    "GrantForm",
    "Prompt",
    "PromptAnswer",
    "TextPrompt",
    "preview_html",
]


class ChoicePrompt(Prompt):
    """Pick one of several options (``ctx.ui.select``)."""

    def __init__(self, *, title: str, options: Sequence[str], timeout: float | None) -> None:
        self.dropdown = widgets.Dropdown(options=list(options))
        self.ok_button = button("OK", "primary", lambda: self.choose(self.dropdown.value))
        self.cancel_button = button("Cancel", "", self.cancel)
        super().__init__(
            title=title,
            timeout=timeout,
            body=[self.dropdown],
            controls=[self.ok_button, self.cancel_button],
        )
        self._controls.append(self.dropdown)

    def choose(self, option: Any) -> bool:
        """Answer with ``option``."""
        return self._decide("answered", option)

    def cancel(self) -> bool:
        """Decline to answer."""
        return self._decide("cancelled")


class TextPrompt(Prompt):
    """Type a line of text (``ctx.ui.input``)."""

    def __init__(self, *, title: str, placeholder: str, timeout: float | None) -> None:
        self.text = widgets.Text(placeholder=placeholder)
        self.submit_button = button("Submit", "primary", lambda: self.submit(self.text.value))
        self.cancel_button = button("Cancel", "", self.cancel)
        super().__init__(
            title=title,
            timeout=timeout,
            body=[self.text],
            controls=[self.submit_button, self.cancel_button],
        )
        self._controls.append(self.text)

    def submit(self, value: str) -> bool:
        """Answer with ``value``."""
        return self._decide("answered", value)

    def cancel(self) -> bool:
        """Decline to answer."""
        return self._decide("cancelled")
