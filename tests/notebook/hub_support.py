"""Support for the JupyterHub test: a real two-user hub on 127.0.0.1, everything in a temp dir.

The hub (jupyterhub from PyPI) runs with its proxy (``configurable-http-proxy`` from the npm
registry: on ``PATH``, or where ``.ci/run`` installs it, ``.ci/node``), the ``dummy``
authenticator with one password, and ``SimpleLocalProcessSpawner``: each user gets a home
under the temp dir and a single-user JupyterLab running as the hub's own OS user (hence
``--allow-root`` when that is root). Nothing from the machine's home leaks in: the spawner
passes only its short list of variables, and ``HOME`` is the user's own.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from browser_support import _SETTINGS, _free_port  # pyright: ignore[reportPrivateUsage]

ROOT = Path(__file__).resolve().parents[2]
PROXY_NAME = "configurable-http-proxy"
PASSWORD = "pi-review-password"


def find_proxy() -> str | None:
    """The proxy's executable: on ``PATH``, else the copy ``.ci/run`` installs."""
    found = shutil.which(PROXY_NAME)
    if found:
        return found
    local = ROOT / ".ci" / "node" / "node_modules" / ".bin" / PROXY_NAME
    return str(local) if local.exists() else None


@dataclass
class Hub:
    """A running JupyterHub (see :func:`start_hub`)."""

    process: subprocess.Popen[bytes]
    base: str
    token: str
    homes: Path
    log: Path

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """Call the hub's REST API as the test's service (a JSON body, ``{}`` when none: the
        hub refuses a body-less POST as a form post)."""
        data = json.dumps({} if body is None and method != "GET" else body).encode()
        request = urllib.request.Request(
            f"{self.base}/hub/api{path}",
            method=method,
            data=None if method == "GET" else data,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
        return json.loads(text) if text else None

    def spawn(self, user: str) -> None:
        """Ask the hub to start ``user``'s server (it answers before the server is up)."""
        self.api("POST", f"/users/{user}/server")

    def wait_ready(self, user: str, timeout: float = 120) -> None:
        """Wait until ``user``'s server is up (the hub polls it; this polls the hub)."""
        deadline = time.monotonic() + timeout
        while True:
            server = (self.api("GET", f"/users/{user}").get("servers") or {}).get("")
            if server and server.get("ready"):
                return
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"{user}'s server did not start:\n{self.log_tail()}")
            time.sleep(0.25)  # polling the hub's API until the spawn ends; not a UI wait

    def log_tail(self, chars: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def stop(self) -> None:
        """SIGTERM: the hub stops its proxy, the servers and their kernels."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def _config(
    tmp: Path, *, proxy: str, ports: tuple[int, int, int], token: str, users: tuple[str, ...]
) -> str:
    public, hub_api, proxy_api = ports
    single_user = Path(sys.executable).parent / "jupyterhub-singleuser"
    args = [
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
        *(["--allow-root"] if os.geteuid() == 0 else []),
    ]
    return "\n".join(
        [
            "c = get_config()  # noqa",
            "c.JupyterHub.ip = '127.0.0.1'",
            f"c.JupyterHub.port = {public}",
            "c.JupyterHub.hub_ip = '127.0.0.1'",
            f"c.JupyterHub.hub_port = {hub_api}",
            f"c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:{proxy_api}'",
            f"c.ConfigurableHTTPProxy.command = [{proxy!r}]",
            f"c.ConfigurableHTTPProxy.pid_file = {str(tmp / 'proxy.pid')!r}",
            f"c.JupyterHub.db_url = 'sqlite:///{tmp / 'hub.sqlite'}'",
            f"c.JupyterHub.cookie_secret_file = {str(tmp / 'cookie_secret')!r}",
            "c.JupyterHub.authenticator_class = 'dummy'",
            f"c.DummyAuthenticator.password = {PASSWORD!r}",
            f"c.Authenticator.allowed_users = {set(users)!r}",
            "c.JupyterHub.spawner_class = 'simple'",
            f"c.SimpleLocalProcessSpawner.home_dir_template = {str(tmp / 'home' / '{username}')!r}",
            f"c.Spawner.cmd = [{str(single_user)!r}]",
            f"c.Spawner.args = {args!r}",
            "c.Spawner.default_url = '/lab'",
            f"c.Spawner.environment = {{'PYTHONPATH': {str(ROOT)!r}}}",
            "c.Spawner.http_timeout = 120",
            "c.Spawner.start_timeout = 120",
            f"c.JupyterHub.services = {[{'name': 'pi-test', 'api_token': token}]!r}",
            "c.JupyterHub.load_roles = [{'name': 'pi-test', 'services': ['pi-test'], "
            "'scopes': ['admin:users', 'admin:servers']}]",
        ]
    )


def start_hub(tmp: Path, users: tuple[str, ...], *, proxy: str, timeout: float = 90) -> Hub:
    """Start a hub for ``users`` with everything under ``tmp``; wait until it is healthy.

    Each user's home (``tmp/home/NAME``) is made first, with JupyterLab settings that keep
    news and update checks off the page; put the user's notebooks there before they open.
    """
    homes = tmp / "home"
    for user in users:
        for rel, value in _SETTINGS.items():
            target = homes / user / ".jupyter" / "lab" / "user-settings" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(value))
    ports = (_free_port(), _free_port(), _free_port())
    token = secrets.token_hex(24)
    config = tmp / "jupyterhub_config.py"
    config.write_text(_config(tmp, proxy=proxy, ports=ports, token=token, users=users))
    log = tmp / "jupyterhub.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "jupyterhub", "-f", str(config)],
            cwd=tmp,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    hub = Hub(process, f"http://127.0.0.1:{ports[0]}", token, homes, log)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{hub.base}/hub/health", timeout=5) as response:
                if response.status == 200:
                    return hub
        except (OSError, urllib.error.HTTPError):
            pass  # the proxy answers 404 for a moment after it starts
        if time.monotonic() > deadline or process.poll() is not None:
            hub.stop()
            raise RuntimeError(f"JupyterHub did not start:\n{hub.log_tail()}")
        time.sleep(0.2)  # polling a socket until the hub answers; not a wait in the UI
