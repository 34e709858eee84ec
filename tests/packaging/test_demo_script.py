"""scripts/demo.py runs end to end on the sample database and the offline model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_demo_prints_a_read_a_blocked_write_and_an_approved_write(tmp_path: Path) -> None:
    env = {**os.environ, "PI_NOTEBOOK_DATA_DIR": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "demo.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    assert "not an LLM" in out
    assert "<- query_database [ok]: 5 row(s), 3 column(s)." in out
    assert "<- query_database [error]: Write query requires interactive approval." in out
    assert "row(s) affected" in out
    assert "audit chain verifies: True" in out
