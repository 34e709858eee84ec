"""The extension system (layer 3): definitions, the API, the loader, the runner, the wrapper."""

from ..agent.views import CallView
from .api import ExtensionAPI, ToolRegistrationError
from .context import ExtensionContext
from .events import (
    BeforeAgentStartEvent,
    BeforeAgentStartEventResult,
    BeforeProviderRequestEvent,
    BeforeProviderRequestEventResult,
    ContextEvent,
    ContextEventResult,
    ExtensionErrorEvent,
    InputEvent,
    InputEventResult,
    SessionShutdownEvent,
    SessionStartEvent,
    ToolCallEvent,
    ToolCallEventResult,
    ToolResultEvent,
    ToolResultEventResult,
)
from .loader import ENTRY_POINT_GROUP, Diagnostic, entry_point_extensions, labelled_extension
from .runner import ExtensionRunner, RuntimeNotInitializedError
from .types import RegisteredTool, SourceInfo, ToolDefinition, ToolInfo, define_tool
from .ui import CallBoundUI, NoUI, UIContext, bound_to_call
from .wrapper import wrap_registered_tool, wrap_tool_definition

__all__ = [
    "ENTRY_POINT_GROUP",
    "BeforeAgentStartEvent",
    "BeforeAgentStartEventResult",
    "BeforeProviderRequestEvent",
    "BeforeProviderRequestEventResult",
    "CallBoundUI",
    "CallView",
    "ContextEvent",
    "ContextEventResult",
    "Diagnostic",
    "ExtensionAPI",
    "ExtensionContext",
    "ExtensionErrorEvent",
    "ExtensionRunner",
    "InputEvent",
    "InputEventResult",
    "NoUI",
    "RegisteredTool",
    "RuntimeNotInitializedError",
    "SessionShutdownEvent",
    "SessionStartEvent",
    "SourceInfo",
    "ToolCallEvent",
    "ToolCallEventResult",
    "ToolDefinition",
    "ToolInfo",
    "ToolRegistrationError",
    "ToolResultEvent",
    "ToolResultEventResult",
    "UIContext",
    "bound_to_call",
    "define_tool",
    "entry_point_extensions",
    "labelled_extension",
    "wrap_registered_tool",
    "wrap_tool_definition",
]
