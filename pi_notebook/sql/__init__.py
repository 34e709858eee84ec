"""The SQL policy: is a statement a pure read, a write that needs approval, or never run?

Public surface (D1, D2, D10 in ``docs/spec.md``):

* :func:`classify` -> :class:`Verdict` (``read`` / ``write`` / ``reject`` + reasons);
* :func:`canonicalize` and :func:`args_hash`, what approvals are bound to;
* :data:`POLICY_VERSION`, recorded with every approval.

The database backend lives in ``pi_notebook.sql.backend`` and imports these names.
"""

from pi_notebook.sql.canonical import args_hash, canonicalize
from pi_notebook.sql.classify import classify
from pi_notebook.sql.verdict import POLICY_VERSION, Verdict, VerdictKind

__all__ = [
    "POLICY_VERSION",
    "Verdict",
    "VerdictKind",
    "args_hash",
    # approval binding
    "canonicalize",
    # classification
    "classify",
]
