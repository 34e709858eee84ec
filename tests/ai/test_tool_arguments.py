"""A call's arguments as a provider streams them: parsed with orjson, judged as the json module
judges them, and a scripted call's arguments sent as the JSON text of its script."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest

from pi_notebook.ai.model import Context
from pi_notebook.ai.stream import parse_tool_arguments
from pi_notebook.testing import ScriptedModel, tool_call

_ODD_TEXTS = [
    "",
    "   \n\t",
    "{}",
    '{"a": 1, "a": 2}',  # the last of a repeated key wins, in both
    '{"n": NaN, "i": Infinity, "m": -Infinity}',  # the json module's extensions
    '{"big": 123456789012345678901234567890}',  # past 64 bits
    '{"small": -9223372036854775809}',
    '{"f": 1e400}',  # overflows to infinity in the json module
    '{"s": "\\ud800"}',  # a lone surrogate, escaped
    '{"s": "\\u00e9\\n\\"\\\\"}',
    '\ufeff{"bom": 1}',
    '{"a": 1',  # unterminated
    '{"a": 1} trailing',
    "[1, 2,]",
    "nul",
    '"just text"',
    "42",
    " [0.1, 2.5e-7, -0.0, 1E5] ",
    "[-0, 1.0e-400, 5e-324, 1.7976931348623157e308]",
    '{"x": 18446744073709551615, "y": 9223372036854775807}',  # at the 64-bit limits
]


def _json_module(raw: str) -> tuple[Any, str | None]:
    """What the arguments were before orjson: the json module alone."""
    if raw.strip() == "":
        return {}, None
    try:
        return json.loads(raw), None
    except ValueError as exc:
        return {}, f"Invalid JSON in tool arguments: {exc}"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
    return type(a) is type(b) and a == b


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.randint(-(2**70), 2**70) if rng.random() < 0.2 else rng.randint(-1000, 1000)
    if kind == 2:
        return rng.choice([0.1, -2.5e-7, 1e308, 3.0, rng.uniform(-1e6, 1e6)])
    if kind in (3, 4):
        alphabet = 'aé\n"\\/\t\x00\u2028😀 {}[],:'
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(12)))
    if kind in (5, 6):
        return {f"k{i}": _random_value(rng, depth + 1) for i in range(rng.randrange(4))}
    return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]


@pytest.mark.parametrize("raw", _ODD_TEXTS)
def test_odd_argument_texts_parse_as_the_json_module_parses_them(raw: str) -> None:
    ours, theirs = parse_tool_arguments(raw), _json_module(raw)
    assert _same(ours[0], theirs[0]) and ours[1] == theirs[1]


def test_random_argument_texts_parse_as_the_json_module_parses_them() -> None:
    rng = random.Random(16)
    for _ in range(2000):
        value = _random_value(rng)
        raw = json.dumps(value, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 1]))
        if rng.random() < 0.1:  # cut short: both refuse it with the same message
            raw = raw[: rng.randrange(len(raw) + 1)]
        ours, theirs = parse_tool_arguments(raw), _json_module(raw)
        assert _same(ours[0], theirs[0]) and ours[1] == theirs[1], raw


async def _streamed_arguments(model: ScriptedModel) -> list[Any]:
    context = Context(system_prompt="", messages=[], tools=[])
    events = [event async for event in model.stream(context)]
    return [e.tool_call.arguments for e in events if e.type == "toolcall_end"]  # pyright: ignore[reportAttributeAccessIssue]


async def test_a_scripted_call_streams_the_json_text_of_its_arguments() -> None:
    arguments = {"sql": "SELECT 'é\n'", "n": [1, 2.5, None]}
    model = ScriptedModel([[tool_call("query_database", arguments)]])
    assert await _streamed_arguments(model) == [arguments]


async def test_scripted_arguments_that_are_not_json_fail_when_streamed_not_when_built() -> None:
    model = ScriptedModel([[tool_call("t", {"when": object()})]])  # built without complaint
    with pytest.raises(TypeError, match="not JSON serializable"):
        await _streamed_arguments(model)
