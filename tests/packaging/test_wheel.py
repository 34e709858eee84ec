"""The database extension loads from an installed wheel, not only from a checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import asyncio, pathlib, sys
import pi_notebook
from pi_notebook import create_agent_session

package = pathlib.Path(pi_notebook.__file__).parent
assert str(package).startswith(sys.argv[1]), package  # the installed copy, not the checkout
bundled = package / "_bundled_extensions" / "database.py"

async def main():
    session = create_agent_session(model="offline", extensions=[str(bundled)], audit=False)
    assert not session.diagnostics, session.diagnostics
    await session.prompt("SELECT COUNT(*) AS n FROM customers")
    result = session.messages[2]
    assert result.role == "toolResult" and not result.is_error, result
    print("rows:", int(result.details["dataframe"]["n"].iloc[0]))
    await session.close()

asyncio.run(main())
"""


def test_database_extension_runs_from_an_installed_wheel(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(REPO),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(wheels),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("pi_notebook-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert "pi_notebook/_bundled_extensions/database.py" in names
    assert "pi_notebook/sample_semantic.yaml" in names  # the lesson's semantic file

    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:  # installing a pure wheel is unpacking it
        archive.extractall(site)
    env = {**os.environ, "PYTHONPATH": str(site), "PI_NOTEBOOK_DATA_DIR": str(tmp_path / "data")}
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(site)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "rows: 400" in run.stdout
    # The sample database was created in the data directory, never inside the package.
    assert (tmp_path / "data" / "sample.sqlite").exists()
    assert not list(site.rglob("*.sqlite"))
