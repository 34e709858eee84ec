"""A pydantic parameter model for an MCP tool, built from the server's JSON Schema.

Our ``ToolDefinition`` takes a pydantic model for its parameters; an MCP server describes its
tool's arguments as a JSON Schema. :func:`parameters_model` builds a model class that

* validates arguments with ``jsonschema`` against the server's schema, reporting each problem
  at its path, so the pipeline's ``Validation failed for tool ...`` text names every one (C15);
* keeps the arguments as they are (``extra="allow"``): ``model_dump()`` is what goes to the
  server, and a ``tool_call`` handler may change them in place (S8);
* returns the server's schema from ``model_json_schema()``, so providers see it exactly.

``jsonschema`` is imported when the first model is built, not with this module: its import
costs over a second (its format checkers build grammars), which the MCP server never needs.

What does not belong here: talking to the server, or deciding whether a call needs approval.
"""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self, cast

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.json_schema import DEFAULT_REF_TEMPLATE, GenerateJsonSchema, JsonSchemaMode
from pydantic_core import InitErrorDetails, PydanticCustomError

from pi_notebook.errors import ConfigurationError

if TYPE_CHECKING:
    import jsonschema

__all__ = ["McpParameters", "parameters_model"]

_MAX_PROBLEMS = 20


class McpParameters(BaseModel):
    """Base of the parameter models of MCP tools: arguments kept as sent, checked by schema."""

    model_config = ConfigDict(extra="allow")

    json_schema_: ClassVar[dict[str, Any]] = {"type": "object"}
    validator_: ClassVar[Any] = None

    @classmethod
    def model_validate(
        cls,
        obj: Any,
        *,
        strict: bool | None = None,
        extra: Literal["allow", "ignore", "forbid"] | None = None,
        from_attributes: bool | None = None,
        context: Any | None = None,
        by_alias: bool | None = None,
        by_name: bool | None = None,
    ) -> Self:
        """Check ``obj`` against the server's schema; raise ``ValidationError`` listing every
        problem at its path. The arguments are kept unchanged (no coercion: the server's schema
        is the contract)."""
        validator = cls.validator_
        if validator is not None:
            errors = sorted(
                validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))
            )
            if errors:
                raise ValidationError.from_exception_data(
                    cls.__name__, [_line_error(e) for e in errors[:_MAX_PROBLEMS]]
                )
        if not isinstance(obj, dict):  # only reachable when the schema itself allows it
            obj = {}
        return super().model_validate(
            obj,
            strict=strict,
            extra=extra,
            from_attributes=from_attributes,
            context=context,
            by_alias=by_alias,
            by_name=by_name,
        )

    @classmethod
    def model_json_schema(
        cls,
        by_alias: bool | None = None,
        ref_template: str = DEFAULT_REF_TEMPLATE,
        schema_generator: type[GenerateJsonSchema] = GenerateJsonSchema,
        mode: JsonSchemaMode = "validation",
        *,
        union_format: Literal["any_of", "primitive_type_array"] = "any_of",
    ) -> dict[str, Any]:
        """The server's own schema (a copy), whatever the arguments."""
        return copy.deepcopy(cls.json_schema_)


def _line_error(error: jsonschema.ValidationError) -> InitErrorDetails:
    message = error.message if len(error.message) <= 300 else error.message[:299] + "…"
    return {
        "type": PydanticCustomError("json_schema", "{reason}", {"reason": message}),
        "loc": tuple(error.absolute_path),
        "input": error.instance,
    }


def _class_name(tool_name: str) -> str:
    words = re.split(r"[^0-9A-Za-z]+", tool_name)
    return "".join(w[:1].upper() + w[1:] for w in words if w) + "Params"


def parameters_model(tool_name: str, schema: Any) -> type[McpParameters]:
    """A parameter model for the MCP tool ``tool_name`` whose input schema is ``schema``.

    A schema without a root ``type`` gets ``"type": "object"`` (MCP requires it; some servers
    leave it out). The schema is checked against its own metaschema here, once.

    Raises:
        ConfigurationError: ``schema`` is not a JSON object schema or is not valid JSON Schema.
    """
    import jsonschema
    import jsonschema.validators
    from jsonschema.exceptions import SchemaError

    if not isinstance(schema, dict):
        raise ConfigurationError(
            f"MCP tool {tool_name!r} has an input schema that is not an object"
        )
    schema = copy.deepcopy(cast(dict[str, Any], schema))
    schema.setdefault("type", "object")
    if schema.get("type") != "object":
        raise ConfigurationError(
            f"MCP tool {tool_name!r} takes {schema.get('type')!r}, not an object of arguments"
        )
    validator_class = jsonschema.validators.validator_for(
        schema, default=jsonschema.Draft202012Validator
    )
    try:
        validator_class.check_schema(schema)
    except SchemaError as exc:
        raise ConfigurationError(
            f"MCP tool {tool_name!r} has an invalid input schema: {exc.message}"
        ) from exc
    namespace = {
        "json_schema_": schema,
        "validator_": validator_class(schema),
        "__doc__": f"Arguments of the MCP tool {tool_name!r}, as its server's schema states.",
        "__module__": __name__,
    }
    return type(_class_name(tool_name), (McpParameters,), namespace)
