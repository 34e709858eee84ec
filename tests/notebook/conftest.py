"""Fixtures for the notebook tests: an in-process IPython shell with the extension loaded."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell


@pytest.fixture(scope="module")
def shared_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One data directory per module, so the sample database is built once, not per test."""
    return tmp_path_factory.mktemp("pi_nb_data")


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    sh = InteractiveShell.instance()
    yield sh


@pytest.fixture
async def loaded(
    shell: InteractiveShell,
    shared_data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> AsyncIterator[InteractiveShell]:
    """The shell with ``%load_ext pi_notebook`` done, inside the test's running loop."""
    monkeypatch.setenv("PI_NOTEBOOK_DATA_DIR", str(shared_data_dir))
    shell.run_line_magic("load_ext", "pi_notebook")
    capsys.readouterr()
    yield shell
    from pi_notebook.notebook import current

    state = current()
    if state.active_run is not None and state.active_run.task is not None:
        state.active_run.abort()
        await state.active_run.wait(timeout=10)
    shell.run_line_magic("unload_ext", "pi_notebook")
    shell.config.pop("PiNotebook", None)  # %config lands in the singleton shell's config too
    for task in list(state._background):  # let the old sessions close on this loop
        await task
