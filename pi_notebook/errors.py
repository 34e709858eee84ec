"""Every exception pi_notebook raises on purpose, in one tree.

Catch :class:`PiNotebookError` to catch them all. Each class keeps the builtin it has always
been (``ValueError``, ``RuntimeError``, ...) as a mix-in, so code that caught the builtin
still does::

    PiNotebookError
    ├── AbortError                      work stopped because its abort signal fired
    │   └── QueryAborted                (also a QueryError) a statement was cancelled, rolled back
    ├── ConfigurationError (ValueError) a setting or argument names nothing usable
    │   ├── ModelSpecError              the model string resolves to no model
    │   ├── ToolRegistrationError       a tool definition cannot be registered (C6)
    │   └── GrantError                  a scoped grant that may not be created
    ├── ToolArgumentsError              a tool call's arguments failed preparation or validation
    ├── UnexpectedModelCall (AssertionError)  a ScriptedModel ran past its script
    ├── StateError (RuntimeError)       the call does not fit what the object is doing now
    │   ├── AgentBusyError              a prompt while a run is going
    │   ├── SessionClosedError          a prompt after close()
    │   ├── RuntimeNotInitializedError  an ExtensionAPI runtime call while factories load (C3)
    │   └── AwaitNotSupportedError      the kernel cannot take clicks while a cell awaits
    ├── ApprovalRefused                 a call was refused right before execute: it lacks the
    │                                   approval it needs, or its arguments changed since
    ├── ReviewRefused (PermissionError) a review decision this person may not make (their own
    │                                   request, or not on its list of reviewers)
    ├── QueryError                      a statement did not run or failed (short, safe text)
    │   ├── QueryRefused                the backend's final check refused it; nothing ran
    │   └── QueryAborted
    └── AuditError                      the audit log could not do what was asked
        └── AuditUnavailableError       a durable record could not be committed in time

The modules that raise these re-export them under their old import paths.
What does not belong here: internal signalling exceptions that never leave a module.
"""

from __future__ import annotations

__all__ = [
    "AbortError",
    "AgentBusyError",
    "ApprovalRefused",
    "AuditError",
    "AuditUnavailableError",
    "AwaitNotSupportedError",
    "ConfigurationError",
    "GrantError",
    "ModelSpecError",
    "PiNotebookError",
    "QueryAborted",
    "QueryError",
    "QueryRefused",
    "ReviewRefused",
    "RuntimeNotInitializedError",
    "SessionClosedError",
    "StateError",
    "ToolArgumentsError",
    "ToolRegistrationError",
    "UnexpectedModelCall",
]


class PiNotebookError(Exception):
    """Base of every exception pi_notebook raises on purpose."""


class AbortError(PiNotebookError):
    """Raised by work that honours an abort signal."""

    def __init__(self, message: str = "Operation aborted") -> None:
        super().__init__(message)


class ConfigurationError(PiNotebookError, ValueError):
    """A setting or argument names nothing this installation can use."""


class ModelSpecError(ConfigurationError):
    """The ``model`` argument names no model this installation can build."""


class ToolRegistrationError(ConfigurationError):
    """A tool definition that cannot be registered (C6)."""


class GrantError(ConfigurationError):
    """A scoped grant that may not be created (DDL, privileges, settings, files, no bound)."""


class ApprovalRefused(PiNotebookError):
    """A call was refused right before ``execute``; the message says why and nothing ran."""


class ReviewRefused(PiNotebookError, PermissionError):
    """A review decision this person may not make: the requester deciding their own request, a
    reviewer not on its list, or a reviewer who is not the deciding process's user. The request
    stays open and the attempt is audited."""


class ToolArgumentsError(PiNotebookError):
    """Arguments could not be prepared or validated; the message is the error result."""


class UnexpectedModelCall(PiNotebookError, AssertionError):
    """The model was asked for more answers than the script holds."""


class StateError(PiNotebookError, RuntimeError):
    """The call does not fit what the object is doing now."""


class AgentBusyError(StateError):
    """``prompt`` was called while a run is still going."""


class SessionClosedError(StateError):
    """The session was closed; create a new one."""


class RuntimeNotInitializedError(StateError):
    """An ExtensionAPI runtime call came before the session was bound (C3)."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"extension runtime not initialized: {what}() cannot be called while extensions "
            "are loading; call it from an event handler or a tool instead"
        )


class AwaitNotSupportedError(StateError):
    """This kernel cannot deliver widget clicks while a cell awaits."""


class QueryError(PiNotebookError):
    """A statement did not run or failed; the message is short and safe to show the model."""


class QueryRefused(QueryError):
    """The backend's final check refused the statement before it reached the database."""


class QueryAborted(QueryError, AbortError):
    """The run was aborted; the statement was cancelled at the driver and rolled back."""


class AuditError(PiNotebookError):
    """The audit log could not do what was asked."""


class AuditUnavailableError(AuditError):
    """A durable record could not be committed within its time limit.

    Anything that record would have authorised must not happen (fail closed).
    """
