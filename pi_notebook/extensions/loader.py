"""The loader: turn extension sources into loaded extensions, with diagnostics.

A source is a factory (any callable taking ``pi``), a module name, a ``.py`` file
path, or an entry point of the ``pi_notebook.extensions`` group. Files and modules
expose their factory as a module-level ``register`` (C35). Factories may be sync or
async. A factory that raises becomes a diagnostic naming its source, and the other
extensions still load.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, TypeAlias, cast

from .api import ExtensionAPI
from .runner import Extension, ExtensionRunner
from .types import SourceInfo

__all__ = [
    "ENTRY_POINT_GROUP",
    "Diagnostic",
    "ExtensionSource",
    "entry_point_extensions",
    "labelled_extension",
    "load_extensions",
    "load_module_file",
]

ENTRY_POINT_GROUP = "pi_notebook.extensions"
Factory: TypeAlias = Callable[[ExtensionAPI], Any]
ExtensionSource: TypeAlias = Factory | str | os.PathLike[str] | EntryPoint


@dataclass(frozen=True, kw_only=True)
class Diagnostic:
    """A load-time problem: a failed extension or a tool-name clash."""

    extension_path: str
    message: str
    level: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        return f"{self.extension_path}: {self.message}"


class labelled_extension:
    """A factory with the source path it should be listed under (C5).

    A factory object may also carry an ``extension_path`` attribute itself, as the
    database extension does; this wrapper gives one to any callable.
    """

    def __init__(self, factory: Factory, extension_path: str) -> None:
        self.factory = factory
        self.extension_path = extension_path

    def __call__(self, pi: ExtensionAPI) -> Any:
        return self.factory(pi)


def entry_point_extensions() -> list[EntryPoint]:
    """Installed extensions advertised in the ``pi_notebook.extensions`` group."""
    return list(entry_points(group=ENTRY_POINT_GROUP))


def load_module_file(path: Path) -> ModuleType:
    """Import a ``.py`` file as a module under a name unique to its path."""
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(
        f"pi_notebook_extension_{path.stem}_{digest}", path
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as importlib's own recipe does: dataclasses and pydantic
    # look a class's module up in sys.modules to resolve string annotations.
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(spec.name, None)
        raise
    return module


def _load_file(path: Path) -> Factory:
    return _register_of(load_module_file(path), str(path))


def _register_of(module: Any, where: str) -> Factory:
    factory = getattr(module, "register", None)
    if not callable(factory):
        raise ImportError(f"{where} has no module-level callable named register(pi)")
    return factory


def _resolve(source: ExtensionSource, inline_index: int) -> tuple[SourceInfo, Factory]:
    if isinstance(source, EntryPoint):
        return SourceInfo(kind="extension", path=source.value), source.load()
    if isinstance(source, str | os.PathLike):
        text = os.fspath(cast("str | os.PathLike[str]", source))
        path = Path(text).expanduser()
        if text.endswith(".py") or os.sep in text or path.exists():
            resolved = path.resolve()
            info = SourceInfo(kind="extension", path=str(resolved))
            if not resolved.is_file():
                raise FileNotFoundError(f"no such extension file: {resolved}")
            return info, _load_file(resolved)
        return SourceInfo(kind="extension", path=text), _register_of(
            importlib.import_module(text), text
        )
    if callable(source):
        label = getattr(source, "extension_path", None)
        path = label if isinstance(label, str) and label else f"<inline:{inline_index}>"
        return SourceInfo(kind="extension", path=path), source
    raise TypeError(f"cannot load an extension from {type(source).__name__}")


def _source_label(source: ExtensionSource, inline_index: int) -> str:
    if isinstance(source, EntryPoint):
        return source.value
    if isinstance(source, str | os.PathLike):
        return os.fspath(source)
    return f"<inline:{inline_index}>"


def load_extensions(
    sources: Iterable[ExtensionSource],
    runner: ExtensionRunner,
    make_api: Callable[[Extension], ExtensionAPI],
) -> tuple[list[Diagnostic], list[tuple[Extension, Coroutine[Any, Any, Any]]]]:
    """Load every source into ``runner``. Returns diagnostics and the coroutines of
    async factories, which the caller awaits (see :func:`finish_async_loads`)."""
    diagnostics: list[Diagnostic] = []
    pending: list[tuple[Extension, Coroutine[Any, Any, Any]]] = []
    inline = 0
    for source in sources:
        if (
            callable(source)
            and not isinstance(source, EntryPoint)
            and not getattr(source, "extension_path", None)
        ):
            inline += 1
        try:
            info, factory = _resolve(source, inline)
        except Exception as exc:
            diagnostics.append(
                Diagnostic(
                    extension_path=_source_label(source, inline),
                    message=f"failed to load: {type(exc).__name__}: {exc}",
                )
            )
            continue
        extension = Extension(source_info=info)
        runner.extensions.append(extension)
        try:
            result = factory(make_api(extension))
        except Exception as exc:
            runner.extensions.remove(extension)
            diagnostics.append(
                Diagnostic(
                    extension_path=info.path, message=f"factory raised {type(exc).__name__}: {exc}"
                )
            )
            continue
        if inspect.iscoroutine(result):
            pending.append((extension, result))
    return diagnostics, pending


async def finish_async_loads(
    pending: list[tuple[Extension, Coroutine[Any, Any, Any]]], runner: ExtensionRunner
) -> list[Diagnostic]:
    """Await async factories in load order; one that raises is dropped with a diagnostic."""
    diagnostics: list[Diagnostic] = []
    for extension, coroutine in pending:
        try:
            await coroutine
        except Exception as exc:
            runner.extensions.remove(extension)
            diagnostics.append(
                Diagnostic(
                    extension_path=extension.path,
                    message=f"factory raised {type(exc).__name__}: {exc}",
                )
            )
    return diagnostics


def clash_diagnostics(runner: ExtensionRunner) -> list[Diagnostic]:
    """C4: one diagnostic per tool name a later extension also registered."""
    first: dict[str, str] = {}
    found: list[Diagnostic] = []
    for extension in runner.extensions:
        for name in extension.tools:
            if name in first and first[name] != extension.path:
                found.append(
                    Diagnostic(
                        extension_path=extension.path,
                        message=f'Tool "{name}" conflicts with {first[name]}',
                        level="warning",
                    )
                )
            else:
                first.setdefault(name, extension.path)
    return found
