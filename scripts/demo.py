"""A plain-Python tour: an agent session on the sample database, printed as a conversation.

Runs on the offline model (rules, not an LLM) and the bundled SQLite sample, so it needs
no key and no network. A write is asked for twice: once with no UI (blocked), once with
a console UI that approves it, as a person at a prompt would.

    python scripts/demo.py
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from pi_notebook import create_agent_session
from pi_notebook.ai.abort import AbortSignal
from pi_notebook.ai.messages import content_text

REPO = Path(__file__).resolve().parent.parent
DATABASE_EXTENSION = REPO / "extensions" / "database.py"


class ApprovingConsoleUI:
    """Shows each approval request and approves it (a person would decide here)."""

    async def confirm(
        self,
        title: str,
        message: str,
        *,
        signal: AbortSignal | None = None,
        timeout: float | None = None,
    ) -> bool:
        print(f"\n  [approval] {title}\n    " + message.replace("\n", "\n    "))
        print("  [approval] approved (a person would click Approve)")
        return True


def show(event: Any) -> None:
    if event.type == "message_end":
        message = event.message
        if message.role == "user":
            print(f"\nuser> {content_text(message.content)}")
        elif message.role == "assistant":
            if message.text:
                print(f"assistant> {message.text}")
            for call in message.tool_calls:
                print(f"  -> {call.name}({call.arguments})")
            if message.error_message:
                print(f"assistant (error)> {message.error_message}")
        else:
            status = "error" if message.is_error else "ok"
            preview = content_text(message.content).splitlines()
            print(f"  <- {message.tool_name} [{status}]: " + "\n     ".join(preview[:8]))


async def main() -> int:
    prompts = [
        "What can you do?",
        "SELECT c.name, c.city, COUNT(o.order_id) AS orders\n"
        "FROM customers c JOIN orders o ON o.customer_id = c.customer_id\n"
        "GROUP BY c.customer_id ORDER BY orders DESC LIMIT 5",
        "UPDATE products SET price = price * 1.1 WHERE category = 'Books'",
    ]
    session = create_agent_session(model="offline", extensions=[str(DATABASE_EXTENSION)])
    session.subscribe(show)
    print(f"model: {session.model_name}; tools: {', '.join(session.active_tool_names)}")
    for prompt in prompts:
        await session.prompt(prompt)
    await session.close()

    print("\n--- the same write, now with a UI that approves ---")
    approving = create_agent_session(
        model="offline", extensions=[str(DATABASE_EXTENSION)], ui=ApprovingConsoleUI()
    )
    approving.subscribe(show)
    await approving.prompt(prompts[-1])
    audit = approving.audit
    if audit is not None:
        audit.flush()
        frame = audit.to_dataframe(session=audit.session_id)
        print(
            f"\naudit records of that session: {len(frame)}; kinds: {', '.join(frame['kind'].unique())}"
        )
        print(f"audit chain verifies: {audit.verify().ok}")
    await approving.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
