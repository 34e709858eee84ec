"""A requester in its own process (run by test_approvals_review.py with its own
``PI_NOTEBOOK_USER``): one agent turn that asks for one write on DATA_URL, which waits for a
reviewer in the review store STORE_URL (also the audit store). Usage:

    python review_actor.py DATA_URL STORE_URL SQL TIMEOUT_S REVIEWER[,REVIEWER...]

Prints one JSON line: the call's decision, requester and approver, as the audit holds them.
"""

from __future__ import annotations

import asyncio
import json
import sys

from pi_notebook import create_agent_session
from pi_notebook.approvals import approvals_dataframe
from pi_notebook.audit import AuditLog
from pi_notebook.database import database_extension
from pi_notebook.testing import ScriptedModel, text, tool_call


async def main(
    data_url: str, store_url: str, sql: str, timeout_s: float, reviewers: list[str]
) -> None:
    log = AuditLog(store_url)
    review = {"url": store_url, "reviewers": reviewers, "timeout_s": timeout_s, "poll_s": 0.05}
    session = create_agent_session(
        model=ScriptedModel([[tool_call("query_database", {"sql": sql}, id="w1")], text("done")]),
        extensions=[database_extension(url=data_url, review=review)],
        audit=log,
    )
    await session.prompt("go")
    await session.close()
    frame = approvals_dataframe(log, session=log.session_id)
    log.close()
    row = frame.iloc[-1]
    print(
        json.dumps(
            {
                "decision": row.decision,
                "requester": row.requester,
                "approver": row.approver if isinstance(row.approver, str) else None,
                "reason": row.reason if isinstance(row.reason, str) else None,
            }
        )
    )


if __name__ == "__main__":
    data, store, statement, timeout, names = sys.argv[1:6]
    asyncio.run(main(data, store, statement, float(timeout), names.split(",")))
