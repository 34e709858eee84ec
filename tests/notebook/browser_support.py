"""Support for the browser tests: a private JupyterLab server, PNG decoding, notebook files.

The server is hermetic: its own root, config, settings, workspaces, IPython and data dirs, so
nothing from the user's home (saved workspaces that reopen old tabs, news pop-ups, IPython
startup files) changes what the browser sees.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import struct
import subprocess
import sys
import time
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# JupyterLab user settings written before the server starts: no news toast over the cells,
# no update check.
_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB(A) PNG into ``(width, channels, rows of raw pixel bytes)``."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = (
        zlib.decompress(idat),
        width * channels,
        [],
        bytearray(width * channels),
    )
    for y in range(height):
        filt, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if filt == 1:
                line[i] = (line[i] + a) & 255
            elif filt == 2:
                line[i] = (line[i] + b) & 255
            elif filt == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif filt == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, channels, rows


def count_green(png: bytes) -> int:
    """Pixels that are clearly green (JupyterLab's "success" button colour)."""
    width, channels, rows = png_pixels(png)
    return sum(
        1
        for row in rows
        for x in range(0, width * channels, channels)
        if row[x + 1] > 120 and row[x + 1] > row[x] + 40 and row[x + 1] > row[x + 2] + 40
    )


def notebook_json(cells: list[str]) -> str:
    """A minimal nbformat 4 notebook with one code cell per source string."""
    return json.dumps(
        {
            "cells": [
                {
                    "cell_type": "code",
                    "source": s,
                    "metadata": {},
                    "outputs": [],
                    "execution_count": None,
                }
                for s in cells
            ],
            "metadata": {
                "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
            },
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LabServer:
    """A running JupyterLab server (see :func:`start_lab`)."""

    process: subprocess.Popen[bytes]
    base: str
    token: str
    root: Path
    data: Path
    log: Path

    def url(self, path: str) -> str:
        return f"{self.base}{path}{'&' if '?' in path else '?'}token={self.token}"

    def api(self, method: str, path: str, body: Any = None) -> Any:
        request = urllib.request.Request(
            f"{self.base}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
        return json.loads(text) if text else None

    def shutdown_sessions(self) -> None:
        """Shut down every kernel session, so finished tests stop using CPU."""
        for session in self.api("GET", "/api/sessions"):
            try:
                self.api("DELETE", f"/api/sessions/{session['id']}")
            except OSError:
                pass

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def start_lab(tmp: Path, timeout: float = 90) -> LabServer:
    """Start JupyterLab on 127.0.0.1 with everything under ``tmp``; wait until it answers."""
    root, data, config, ipython = (tmp / name for name in ("root", "data", "config", "ipython"))
    for folder in (root, data, config, ipython):
        folder.mkdir(parents=True, exist_ok=True)
    settings = config / "lab" / "user-settings"
    for rel, value in _SETTINGS.items():
        target = settings / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(value))
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "PI_NOTEBOOK_DATA_DIR": str(data),
        "JUPYTER_CONFIG_DIR": str(config),
        "IPYTHONDIR": str(ipython),
    }
    log = tmp / "jupyterlab.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyterlab",
                "--ip=127.0.0.1",
                f"--port={port}",
                "--no-browser",
                f"--IdentityProvider.token={token}",
                f"--ServerApp.root_dir={root}",
                "--ServerApp.port_retries=0",
                f"--LabApp.user_settings_dir={settings}",
                f"--LabApp.workspaces_dir={config / 'lab' / 'workspaces'}",
                "--LabApp.news_url=",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                "--LabApp.extension_manager=readonly",
                "--LabApp.expose_app_in_browser=True",
                *(["--allow-root"] if os.geteuid() == 0 else []),
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = LabServer(process, f"http://127.0.0.1:{port}", token, root, data, log)
    deadline = time.monotonic() + timeout
    while True:
        try:
            server.api("GET", "/api/status")
            return server
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                server.stop()
                raise RuntimeError(f"JupyterLab did not start:\n{server.log_tail()}") from None
            time.sleep(0.2)  # polling a socket until the server answers; not a wait in the UI
