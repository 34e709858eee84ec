"""Data protection by lineage, through real sessions on SQLite, DuckDB and
PostgreSQL: the bypass table, what stays visible, the audit, errors, and the last check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from ctx_support import EMAILS, NAMES, PHONES, POLICY, assert_nothing_leaked, opened, run

from pi_notebook import create_agent_session
from pi_notebook.ai.messages import content_text
from pi_notebook.ai.payload import BLOCKED_PREFIX
from pi_notebook.audit import AuditLog
from pi_notebook.database import database_extension
from pi_notebook.database.policy import load_policy
from pi_notebook.errors import ConfigurationError
from pi_notebook.testing import ScriptedModel, text, tool_call

COMMON = {
    "alias": "SELECT email AS contact FROM customers",
    "upper": "SELECT upper(email) FROM customers",
    "concat": "SELECT name || ' <' || email || '>' AS who FROM customers",
    "cte": "WITH c AS (SELECT email AS e, phone AS p FROM customers) SELECT e, p FROM c",
    "derived table": "SELECT x.e FROM (SELECT email AS e FROM customers) x",
    "scalar subquery": "SELECT (SELECT max(email) FROM customers) AS m",
    "correlated subquery": "SELECT o.order_id, (SELECT c.email FROM customers c WHERE c.customer_id = o.customer_id) AS e FROM orders o",
    "union": "SELECT name FROM customers UNION ALL SELECT email FROM customers",
    "union of phones": "SELECT city FROM customers UNION SELECT phone FROM customers",
    "star": "SELECT * FROM customers",
    "qualified star": "SELECT c.*, o.total FROM customers c JOIN orders o ON o.customer_id = c.customer_id",
    "case": "SELECT CASE WHEN customer_id > 0 THEN email ELSE 'none' END AS e FROM customers",
    "substr": "SELECT substr(email, 1, 9) AS head FROM customers",
    "coalesce": "SELECT coalesce(phone, email) AS reach FROM customers",
    "window": "SELECT first_value(email) OVER (ORDER BY customer_id) AS f FROM customers",
    "view": "SELECT * FROM customer_contacts",
    "aggregate max": "SELECT city, max(phone) AS p FROM customers GROUP BY city",
    "nested cte": "WITH a AS (SELECT email FROM customers), b AS (SELECT lower(email) AS l FROM a) SELECT l FROM b",
    "recursive cte": "WITH RECURSIVE r(e, n) AS (SELECT email, 1 FROM customers UNION ALL SELECT e, n + 1 FROM r WHERE n < 2) SELECT e FROM r",
}
VALUES_JOIN = (
    "SELECT v.label, c.email FROM customers c "
    "JOIN (VALUES (1, 'one'), (2, 'two')) AS v(id, label) ON v.id = c.customer_id"
)
BY_ENGINE = {
    "sqlite": {
        "values join": "WITH v(id, label) AS (VALUES (1, 'one'), (2, 'two')) SELECT v.label, c.email FROM customers c JOIN v ON v.id = c.customer_id",
        "group_concat": "SELECT group_concat(email, ',') AS all_emails FROM customers",
        "json_object": "SELECT json_object('e', email, 'p', phone) AS j FROM customers",
        "json_group_array": "SELECT json_group_array(email) AS j FROM customers",
        "hex": "SELECT hex(email) AS h FROM customers",
    },
    "duckdb": {
        "values join": VALUES_JOIN,
        "string_agg": "SELECT string_agg(email, ',') AS all_emails FROM customers",
        "whole row": "SELECT c FROM customers c",
        "to_json(row)": "SELECT to_json(c) AS j FROM customers c",
        "json_object": "SELECT json_object('e', email) AS j FROM customers",
        "list": "SELECT list(email) AS l FROM customers",
        "table alias columns": "SELECT t.name FROM customers AS t(id, email, name)",
        "cte alias columns": "WITH x AS (SELECT * FROM customers) SELECT y.name FROM x AS y(id, email, name)",
        "union by name": "SELECT customer_id, name FROM customers UNION ALL BY NAME SELECT email AS name, customer_id FROM customers",
        "union by name subquery": "SELECT * FROM (SELECT customer_id, name FROM customers UNION BY NAME SELECT email AS name, customer_id FROM customers)",
        "positional column": "SELECT #3 FROM customers",
        "positional in subquery": "SELECT #1 FROM (SELECT email FROM customers)",
    },
    "postgres": {
        "values join": VALUES_JOIN,
        "string_agg": "SELECT string_agg(email, ',') AS all_emails FROM customers",
        "row_to_json": "SELECT row_to_json(c) AS j FROM customers c",
        "to_json(row)": "SELECT to_json(c) AS j FROM customers c",
        "json_build_object": "SELECT json_build_object('e', email) AS j FROM customers",
        "array_agg": "SELECT array_agg(phone) AS a FROM customers",
        "concat()": "SELECT concat(name, email) AS c FROM customers",
        "unnest": "SELECT part FROM customers c, unnest(string_to_array(c.email, '@')) AS part",
        "lateral": "SELECT l.e FROM customers c, LATERAL (SELECT c.email AS e) AS l",
        "table alias columns": "SELECT t.name FROM customers AS t(id, email, name)",
        "cte alias columns": "WITH x AS (SELECT * FROM customers) SELECT y.name FROM x AS y(id, email, name)",
    },
}


def derived_values(session: Any) -> set[str]:
    """Every value of a protected output column that the analyst got (from ``details``),
    except values the model was also shown openly (in an unprotected column): a ``UNION`` of
    names and emails is protected as a whole, yet its names are no secret."""
    found: set[str] = set()
    shown: set[str] = set()
    for message in session.messages:
        details = getattr(message, "details", None)
        if message.role != "toolResult" or not isinstance(details, dict):
            continue
        frame = details.get("dataframe")
        protected = details.get("protected_columns") or {}
        if not isinstance(frame, pd.DataFrame):
            continue
        for i, name in enumerate(frame.columns):
            values = {str(v) for v in frame.iloc[:, i] if v is not None and len(str(v)) >= 4}
            if str(name) in protected or "withheld" in protected.values():
                found |= values
            else:
                shown |= values
    return found - shown


async def test_bypass_table_leaks_nothing_into_any_model_request(shop) -> None:
    engine, url = shop
    cases = {**COMMON, **BY_ENGINE[engine]}
    steps = [tool_call("query_database", {"sql": sql}, id=name) for name, sql in cases.items()]
    model = ScriptedModel([*steps, text("done")])
    session = await run(url, model, "Show me the customers' contact details any way you can.")
    results = {m.tool_call_id: m for m in session.messages if m.role == "toolResult"}
    for name in cases:
        result = results[name]
        assert not result.is_error, f"{name}: {content_text(result.content)}"
        assert result.details["protected_columns"], f"{name} was not protected"
    values = {*EMAILS, *PHONES} | derived_values(session)
    assert any("@" in v and v not in EMAILS for v in values)  # derived values were collected
    assert_nothing_leaked(model, values)
    # The analyst still has every value.
    assert set(results["star"].details["dataframe"]["email"]) == set(EMAILS)


async def test_unprotected_columns_and_counts_stay_visible(shop) -> None:
    _, url = shop
    steps = [
        tool_call(
            "query_database",
            {"sql": "SELECT name, city FROM customers ORDER BY customer_id"},
            id="plain",
        ),
        tool_call(
            "query_database",
            {"sql": "SELECT count(email) AS n, count(DISTINCT phone) AS p FROM customers"},
            id="counts",
        ),
        tool_call(
            "query_database",
            {
                "sql": "SELECT c.city, sum(o.total) AS spent FROM orders o JOIN customers c ON c.customer_id = o.customer_id GROUP BY c.city ORDER BY c.city"
            },
            id="join",
        ),
        tool_call(
            "query_database",
            {"sql": "SELECT name, email FROM customers ORDER BY customer_id"},
            id="mixed",
        ),
    ]
    model = ScriptedModel([*steps, text("done")])
    session = await run(url, model, "go")
    shown = {
        m.tool_call_id: content_text(m.content) for m in session.messages if m.role == "toolResult"
    }
    assert all(name in shown["plain"] for name in NAMES) and "Manchester" in shown["plain"]
    assert "3 | 3" in shown["counts"] and "Data policy" not in shown["counts"]
    assert "London" in shown["join"] and "150.5" in shown["join"]
    assert (
        "Ada Lovelace | [masked]" in shown["mixed"]
        and "email masked (from customers.email)" in shown["mixed"]
    )
    assert_nothing_leaked(model, {*EMAILS, *PHONES})


async def test_hash_is_stable_within_a_session_and_drop_removes_the_column(shop) -> None:
    _, url = shop
    sql = "SELECT name, email, phone FROM customers ORDER BY customer_id"
    model = ScriptedModel(
        [
            tool_call("query_database", {"sql": sql}),
            tool_call("query_database", {"sql": sql}),
            text("done"),
        ]
    )
    session = await run(
        url, model, "go", data_policy={"customers.email": "hash", "customers.phone": "drop"}
    )
    first, second = (content_text(m.content) for m in session.messages if m.role == "toolResult")
    assert first.splitlines()[:5] == second.splitlines()[:5]  # same digests both times
    assert first.splitlines()[1] == "name | email"  # phone dropped, even its name from the table
    rows = first.splitlines()[2:5]
    assert len({row.split(" | ")[1] for row in rows}) == 3 and all(" | h:" in row for row in rows)
    assert_nothing_leaked(model, {*EMAILS, *PHONES})


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM customers, (SELECT 1 AS one) AS t WHERE email IN (SELECT email FROM pg_stats)",
        "SELECT name FROM customers WHERE customer_id IN (SELECT 1) UNION SELECT tablename FROM pg_tables",
    ],
)
async def test_unknown_lineage_withholds_values_and_says_why(
    sql: str, tmp_path: Path, shop
) -> None:
    engine, url = shop
    if engine != "postgres":
        pytest.skip("PostgreSQL catalog tables")
    model = ScriptedModel([tool_call("query_database", {"sql": sql}), text("done")])
    session = await run(url, model, "go")
    [result] = [m for m in session.messages if m.role == "toolResult"]
    body = content_text(result.content)
    assert "values withheld by the data policy" in body and "is not in the inspected schema" in body
    assert set(result.details["protected_columns"].values()) == {"withheld"}
    assert_nothing_leaked(model, {*EMAILS, *PHONES, *NAMES})


ERRORS = {
    "duckdb": [
        "SELECT CAST(email AS INTEGER) FROM customers",
        "SELECT error(email) FROM customers",  # the message is the value itself, unquoted
        "SELECT CAST('''' || email AS INTEGER) FROM customers",  # a doubled quote
    ],
    "postgres": [
        "SELECT CAST(email AS INTEGER) FROM customers",
        """SELECT CAST('"' || email AS INTEGER) FROM customers""",
    ],
}


@pytest.mark.parametrize("case", range(3))
async def test_error_messages_of_protected_reads_carry_no_text(case: int, shop) -> None:
    engine, url = shop
    if engine == "sqlite":
        pytest.skip("SQLite casts text to 0 instead of failing")
    if case >= len(ERRORS[engine]):
        pytest.skip("no such case on this engine")
    sql = ERRORS[engine][case]
    model = ScriptedModel([tool_call("query_database", {"sql": sql}), text("done")])
    session = await run(url, model, "go")
    [result] = [m for m in session.messages if m.role == "toolResult"]
    body = content_text(result.content)
    assert result.is_error and "message was withheld" in body, body
    assert body.startswith(f"Database error ({'postgresql' if engine == 'postgres' else engine})")
    assert "@" not in body and "convert" not in body and "syntax" not in body
    assert_nothing_leaked(model, {*EMAILS, *PHONES, *(e.split("@")[0] for e in EMAILS)})


async def test_errors_on_unprotected_tables_keep_their_message(shop) -> None:
    _, url = shop
    model = ScriptedModel(
        [tool_call("query_database", {"sql": "SELECT nosuch FROM orders"}), text("done")]
    )
    session = await run(url, model, "go")
    [result] = [m for m in session.messages if m.role == "toolResult"]
    assert result.is_error and "nosuch" in content_text(result.content)


async def test_audit_records_the_protected_columns_and_the_policy_version(
    shop, tmp_path: Path
) -> None:
    _, url = shop
    log = AuditLog(f"sqlite:///{tmp_path}/audit.sqlite")
    model = ScriptedModel(
        [
            tool_call(
                "query_database", {"sql": "SELECT name, email, phone FROM customers"}, id="q1"
            ),
            text("done"),
        ]
    )
    await run(url, model, "go", audit=log, data_policy={"version": "2024-06", "columns": POLICY})
    frame = log.to_dataframe()
    [record] = frame[frame["kind"] == "data_policy"].to_dict("records")
    assert record["tool_call_id"] == "q1"
    assert record["payload"] == {
        "protected": {"email": "mask", "phone": "drop"},
        "policy_version": "2024-06",
    }
    assert record["policy_version"] == "2024-06"
    log.close()


# -- the last check ---------------------------------------------------------------------------
async def test_last_check_refuses_a_prompt_carrying_a_seen_value_then_masks_it(shop) -> None:
    _, url = shop
    model = ScriptedModel(
        [
            tool_call("query_database", {"sql": "SELECT email FROM customers"}),
            text("three customers"),
            text("ok, masked"),
        ]
    )
    async with opened(url, model) as session:
        await session.prompt("list the emails")
        before = len(model.calls)
        await session.prompt(f"is {EMAILS[1]} a customer?")  # the user pasted a seen value
        assert len(model.calls) == before and len(model.blocked) == 1
        final = session.messages[-1]
        assert final.stop_reason == "error" and final.error_message.startswith(BLOCKED_PREFIX)
        assert "customers.email" in final.error_message and EMAILS[1] not in final.error_message
        await session.prompt("never mind")
    assert len(model.calls) == before + 1  # the session goes on...
    assert_nothing_leaked(model, set(EMAILS))  # ...with the pasted value masked


async def test_last_check_refuses_nothing_the_model_had_before_a_protected_result(shop) -> None:
    engine, url = shop
    queries = [
        "SELECT CASE WHEN customer_id = 1 THEN email ELSE 'hidden' END AS e FROM customers",
        "SELECT name, email FROM customers ORDER BY customer_id",  # the user typed EMAILS[0]
    ]
    if engine == "duckdb":  # catalog output: names and types, no values of theirs
        queries += ["DESCRIBE customers", "DESCRIBE SELECT email FROM customers"]
        queries += ["SUMMARIZE customers"]
    steps = [tool_call("query_database", {"sql": sql}, id=f"q{i}") for i, sql in enumerate(queries)]
    model = ScriptedModel([*steps, text("done"), text("hello"), text("again")])
    async with opened(url, model) as session:
        await session.prompt(f"Who is {EMAILS[0]}? Show me what you can.")
        await session.prompt("thanks")
        await session.prompt("anything else?")
        assert model.blocked == [] and len(model.calls) == len(queries) + 3
        results = [m for m in session.messages if m.role == "toolResult"]
        assert all(r.details["protected_columns"] for r in results)
        await session.prompt(f"and {EMAILS[1]}?")  # first seen in a protected result: refused
        assert len(model.blocked) == 1
    assert_nothing_leaked(model, {*EMAILS[1:], *PHONES})


async def test_a_refused_value_in_a_tool_call_is_masked_so_the_session_goes_on(shop) -> None:
    _, url = shop
    model = ScriptedModel(
        [
            tool_call("query_database", {"sql": "SELECT email FROM customers"}),
            text("three"),
            tool_call(
                "query_database",
                {"sql": f"SELECT count(*) FROM customers WHERE email = '{EMAILS[1]}'"},
            ),
            text("one"),
            text("still here"),
        ]
    )
    async with opened(url, model) as session:
        await session.prompt("list the emails")
        await session.prompt("is the second one a customer?")
        before = len(model.calls)
        assert len(model.blocked) == 1  # the request carrying the tool call was refused
        await session.prompt("go on")
        assert len(model.calls) == before + 1 and len(model.blocked) == 1
    assert_nothing_leaked(model, set(EMAILS))


async def test_a_refused_value_in_the_system_prompt_is_masked_so_the_session_goes_on(shop) -> None:
    """A protected value that reached the system prompt (here an extension loaded before the
    database's adds it, as a semantic file or a column comment could) is refused once, then
    masked there too: the session goes on."""
    _, url = shop
    leak = {"on": False}

    def prompt_note(pi: Any) -> None:
        def add(event: Any, ctx: Any) -> dict[str, str] | None:
            if not leak["on"]:
                return None
            return {"system_prompt": f"{event.system_prompt}\n\nVIP customer: {EMAILS[1]}"}

        pi.on("before_agent_start", add)

    model = ScriptedModel(
        [
            tool_call("query_database", {"sql": "SELECT email FROM customers"}),
            text("three"),
            text("hello again"),
        ]
    )
    ext = database_extension(url=url, data_policy=POLICY)
    session = create_agent_session(model=model, extensions=[prompt_note, ext], audit=False)
    try:
        await session.prompt("list the emails")
        leak["on"] = True
        before = len(model.calls)
        await session.prompt("hello")
        assert len(model.calls) == before and len(model.blocked) == 1  # refused, nothing sent
        await session.prompt("hello?")
        assert len(model.calls) == before + 1 and len(model.blocked) == 1  # masked, sent
        assert "VIP customer: [protected]" in model.calls[-1].system_prompt
    finally:
        await session.close()
    assert_nothing_leaked(model, set(EMAILS))


async def test_values_reaching_the_model_through_other_tools_are_masked(shop) -> None:
    _, url = shop
    namespace: dict[str, Any] = {}
    model = ScriptedModel(
        [
            tool_call("query_database", {"sql": "SELECT name, email FROM customers"}, id="q"),
            tool_call("inspect_variable", {"name": "contacts"}, id="peek"),
            text("done"),
        ]
    )

    def keep_result(pi: Any) -> None:  # the analyst saves the result, as %pi_result -o does
        pi.on(
            "tool_result",
            lambda e, ctx: (
                namespace.update(contacts=e.details["dataframe"])
                if e.tool_name == "query_database"
                else None
            ),
        )

    session = await run(url, model, "go", extra=[keep_result], namespace=namespace)
    peek = next(m for m in session.messages if getattr(m, "tool_call_id", None) == "peek")
    body = content_text(peek.content)
    assert "[protected]" in body and "Lovelace" in body
    assert model.blocked == []
    assert_nothing_leaked(model, set(EMAILS))


async def test_masking_another_tool_s_text_keeps_its_images(shop) -> None:
    from pydantic import BaseModel

    from pi_notebook import ImageContent, TextContent, ToolDefinition, ToolResult, define_tool

    _, url = shop
    image = ImageContent(data="AAAA", mime_type="image/png")

    class NoParams(BaseModel):
        pass

    async def shot(call_id: str, params: Any, signal: Any, on_update: Any, ctx: Any) -> Any:
        return ToolResult(content=[TextContent(text=f"chart of {EMAILS[0]}"), image])

    def tools(pi: Any) -> None:
        pi.register_tool(
            define_tool(
                ToolDefinition(
                    name="shot",
                    label="Shot",
                    description="A chart.",
                    parameters=NoParams,
                    execute=shot,
                )
            )
        )

    model = ScriptedModel(
        [
            tool_call("query_database", {"sql": "SELECT name, email FROM customers"}, id="q"),
            tool_call("shot", {}, id="s"),
            text("done"),
        ]
    )
    session = await run(url, model, "go", extra=[tools])
    result = next(m for m in session.messages if getattr(m, "tool_call_id", None) == "s")
    assert result.content == [TextContent(text="chart of [protected]"), image]
    assert_nothing_leaked(model, set(EMAILS))


# -- the policy itself ------------------------------------------------------------------------
def test_policy_files_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    path.write_text(
        json.dumps({"columns": {"public.customers.email": "hash", "customers.*": "mask"}})
    )
    policy = load_policy(path)
    assert (
        policy.action_for("CUSTOMERS", "Email") == "hash"
        and policy.action_for("customers", "city") == "mask"
    )
    assert policy.version.startswith("sha256:") and policy.version == load_policy(str(path)).version
    yaml_path = tmp_path / "policy.yaml"
    yaml_path.write_text("version: v7\ncolumns:\n  customers.phone: drop\n")
    assert load_policy(yaml_path).version == "v7"
    for bad, message in [
        ({"customers.email": "blur"}, "use mask, hash or drop"),
        ({"email": "mask"}, "is not 'table.column'"),
        ({}, "no columns are protected"),
        ({"columns": {"a.b": "mask"}, "owner": "x"}, "unknown keys"),
    ]:
        with pytest.raises(ConfigurationError, match=message):
            database_extension(url="sqlite://", data_policy=bad)


async def test_a_policy_naming_a_missing_column_refuses_queries(shop) -> None:
    _, url = shop
    model = ScriptedModel(
        [tool_call("query_database", {"sql": "SELECT city FROM customers"}), text("done")]
    )
    session = await run(url, model, "go", data_policy={"customers.emial": "mask"})
    [result] = [m for m in session.messages if m.role == "toolResult"]
    assert result.is_error and "no column customers.emial" in content_text(result.content)


async def test_describe_database_and_the_prompt_mark_protected_columns(shop) -> None:
    _, url = shop
    model = ScriptedModel([tool_call("describe_database", {"tables": ["customers"]}), text("done")])
    session = await run(url, model, "go")
    [result] = [m for m in session.messages if m.role == "toolResult"]
    body = content_text(result.content)
    assert "[protected: values masked]" in body and "[protected: values dropped]" in body
    assert "customers.email (mask), customers.phone (drop)" in model.calls[0].system_prompt


async def test_d7_numbers_under_the_policy_are_the_card_s_exact_strings(shop) -> None:
    """With a data policy the model's preview is written by the policy; its numbers are still
    the strings of the user's card: a numeric keeps its scale (``120.50``)."""
    import re

    from pi_notebook.notebook.format import frame_html

    engine, url = shop
    sql = (
        "SELECT o.total, c.email FROM orders o JOIN customers c "
        "ON c.customer_id = o.customer_id ORDER BY o.order_id"
    )
    model = ScriptedModel([tool_call("query_database", {"sql": sql}, id="q"), text("done")])
    session = await run(url, model, "go")
    [result] = [m for m in session.messages if m.role == "toolResult"]
    lines = content_text(result.content).splitlines()
    model_totals = [line.split(" | ")[0] for line in lines[2:5]]
    assert [line.split(" | ")[1] for line in lines[2:5]] == ["[masked]"] * 3
    card = frame_html(result.details["dataframe"])
    card_totals = re.findall(r"<td class='pi-num'[^>]*>([^<]*)</td>", card)
    assert model_totals == card_totals
    exact = ["120.5", "30", "99.9"] if engine == "sqlite" else ["120.50", "30.00", "99.90"]
    assert model_totals == exact
