"""The main job: JupyterLab on 127.0.0.1 with the quickstart open, or ``--headless``.

    python scripts/lab.py             # start JupyterLab, print the URL of the quickstart
    python scripts/lab.py --headless  # execute the quickstart and print each cell's text output

JupyterLab serves the repository, and opens your own copies of the notebooks in
``my-notebooks/`` (made on first start, never overwritten, ignored by git): saving them leaves
the repository clean, and their links to ``../docs/`` work as in ``notebooks/``. Jupyter's news
prompt is switched off for this server only (``scripts/jupyter_config``, added to
``JUPYTER_CONFIG_PATH``); your own JupyterLab settings, such as the theme, still apply.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
QUICKSTART = NOTEBOOKS / "quickstart.ipynb"
WORK = "my-notebooks"
"""The folder, beside ``notebooks/``, that holds the copies JupyterLab opens."""
LAB_CONFIG = Path(__file__).resolve().parent / "jupyter_config"


def working_copies(root: Path = REPO) -> Path:
    """``root/my-notebooks`` with a copy of each notebook of ``root/notebooks`` it lacks.

    A copy that exists is the user's work: it is never replaced.
    """
    work = root / WORK
    work.mkdir(exist_ok=True)
    for source in sorted((root / "notebooks").glob("*.ipynb")):
        target = work / source.name
        if not target.exists():
            shutil.copyfile(source, target)
    return work


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def headless(path: Path = QUICKSTART, timeout: int = 300) -> int:
    """Execute ``path`` with nbclient (kernel ``python3``) and print its text outputs."""
    import nbclient
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=timeout,
        resources={"metadata": {"path": str(path.parent)}},
    )
    try:
        client.execute()
    finally:
        for number, cell in enumerate(notebook.cells, 1):
            if cell.cell_type != "code":
                continue
            print(f"--- [{number}] {cell.source.splitlines()[0] if cell.source else ''}")
            for output in cell.get("outputs", []):
                if output.get("output_type") == "stream":
                    print(output.get("text", ""), end="")
                elif output.get("output_type") == "error":
                    print(f"{output.get('ename')}: {output.get('evalue')}")
                else:
                    plain = output.get("data", {}).get("text/plain")
                    if plain:
                        print(plain)
    return 0


def lab(port: int | None = None, open_browser: bool = False, root: Path = REPO) -> int:
    """Run JupyterLab on 127.0.0.1 (token auth) with the quickstart open, until interrupted."""
    port = port or _free_port()
    token = secrets.token_hex(16)
    work = working_copies(root)
    env = dict(os.environ)
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(
        [str(LAB_CONFIG), *filter(None, [env.get("JUPYTER_CONFIG_PATH")])]
    )
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--ServerApp.port_retries=0",
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")  # containers run as root; the server still binds 127.0.0.1
    if not open_browser:
        command.append("--no-browser")
    server = subprocess.Popen(command, env=env)
    url = f"http://127.0.0.1:{port}/lab/tree/{work.name}/{QUICKSTART.name}?token={token}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if server.poll() is not None:
                return server.returncode or 1
            time.sleep(0.5)
    print(
        f"JupyterLab is running; open the quickstart at:\n{url}\n"
        f"(your copies of the notebooks are in {work}; saving them leaves the repository "
        "clean)",
        flush=True,
    )
    try:
        return server.wait()
    except KeyboardInterrupt:
        server.terminate()
        return server.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--headless", action="store_true", help="execute the quickstart and print its outputs"
    )
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--open", action="store_true", help="also open a browser")
    parser.add_argument("--root", type=Path, default=REPO, help=argparse.SUPPRESS)  # tests
    args = parser.parse_args(argv)
    return headless() if args.headless else lab(args.port, args.open, args.root)


if __name__ == "__main__":
    sys.exit(main())
