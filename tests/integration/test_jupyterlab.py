"""The executed walkthrough as a user sees it in JupyterLab: a real ``jupyter lab`` on 127.0.0.1
(with a token, stopped by its PID) and a headless Chromium that loads the notebook, dumps the
rendered page and takes a screenshot.

``UPDATE_SCREENSHOTS=1`` copies the screenshot to ``docs/walkthrough_jupyterlab.png`` (shown in the
README): look at it before committing it.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from notebook_helpers import PLOTLY_MIME, browser, execute, outputs
from paths import REPO_ROOT

WINDOW = "1280,1600"
TALL_WINDOW = "1280,20000"
SCREENSHOT = REPO_ROOT / "docs" / "walkthrough_jupyterlab.png"
# Compute blue of analysis.figures.style, as drawn in the temporal breakdown's bars.
COMPUTE_RGB = (0x00, 0x72, 0xB2)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 5):
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (127.0.0.1 only)
        return response.status, response.read()


@pytest.fixture(scope="module")
def lab(sample_traces_dir, tmp_path_factory):
    """(base URL, token, executed notebook) of a JupyterLab serving the executed walkthrough."""
    if not browser():
        pytest.skip("no chromium to look at JupyterLab with")
    nb, work = execute(REPO_ROOT / "notebooks" / "walkthrough.md", sample_traces_dir, tmp_path_factory)
    home = tmp_path_factory.mktemp("jupyter-home")
    settings = home / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    # no "news" and update toasts over the notebook
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_DATA_DIR": str(home / "data"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
        "TRACE_ANALYSIS_CACHE": str(home / "cache"),
    }
    jupyter = [sys.executable, "-m", "jupyter"]
    # trusted, as the user's own executed notebook is: its HTML outputs are shown unsanitised
    subprocess.run([*jupyter, "trust", str(work / "walkthrough.ipynb")], env=env, check=True,
                   capture_output=True, timeout=60)
    port, token = _free_port(), secrets.token_hex(16)
    log = (home / "lab.log").open("wb")
    server = subprocess.Popen(
        [*jupyter, "lab", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={work}"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if _get(f"{base}/api/status?token={token}")[0] == 200:
                    break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"jupyter lab did not start: {(home / 'lab.log').read_text()[-2000:]}")
            time.sleep(0.5)
        # the notebook alone, side bars collapsed
        layout = {"data": {"layout-restorer:data": {
            "main": {"dock": {"type": "tab-area", "currentIndex": 0,
                              "widgets": ["notebook:walkthrough.ipynb"]},
                     "current": "notebook:walkthrough.ipynb"},
            "left": {"collapsed": True, "visible": True, "widgets": ["filebrowser"]},
            "right": {"collapsed": True, "visible": True, "widgets": []},
        }}, "metadata": {"id": "default"}}
        request = urllib.request.Request(
            f"{base}/lab/api/workspaces/default?token={token}", data=json.dumps(layout).encode(),
            method="PUT", headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(request, timeout=10).close()  # noqa: S310
        yield base, token, nb
    finally:
        # stop the server we started, by its PID (its kernels go with it)
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
        log.close()


def _chromium(url: str, *args: str, window: str = WINDOW) -> subprocess.CompletedProcess:
    return subprocess.run(
        [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--hide-scrollbars", f"--window-size={window}", "--virtual-time-budget=30000", *args, url],
        capture_output=True, text=True, timeout=240, check=True,
    )


def test_walkthrough_in_jupyterlab(lab, tmp_path):
    base, token, nb = lab
    url = f"{base}/lab/tree/walkthrough.ipynb?token={token}"
    n_figures = sum(PLOTLY_MIME in o.get("data", {}) for _, o in outputs(nb))

    # One browser run (a browser start costs ~10 s) in a window tall enough for JupyterLab to draw
    # every cell: the rendered DOM and a screenshot of the whole window.
    tall = tmp_path / "tall.png"
    dom = _chromium(url, "--dump-dom", f"--screenshot={tall}", window=TALL_WINDOW).stdout
    # the rich summary, rendered as HTML (not as text), and no broken widget
    assert "trace-analysis-summary" in dom and "Profiler steps analysed" in dom
    assert "Error displaying" not in dom
    # JupyterLab draws each figure from plotly's mime bundle
    drawn = len(re.findall(r'class="[^"]*\bjs-plotly-plot\b', dom))
    assert drawn == n_figures, f"{drawn} of {n_figures} figures drawn"

    import numpy as np
    from PIL import Image

    # its first screen is not a blank page, and the figures' compute-blue bars are drawn
    image = Image.open(tall).convert("RGB")
    assert image.size == tuple(int(v) for v in TALL_WINDOW.split(","))
    width, height = (int(v) for v in WINDOW.split(","))
    first_screen = image.crop((0, 0, width, height))
    assert len(first_screen.getcolors(maxcolors=1 << 20) or []) > 200, "a blank page"
    pixels = np.asarray(image, dtype=np.int16)
    blue = int((np.abs(pixels - np.array(COMPUTE_RGB, dtype=np.int16)) <= 8).all(axis=-1).sum())
    assert blue > 5000, f"no compute-blue bars drawn ({blue} px)"
    if os.environ.get("UPDATE_SCREENSHOTS"):  # the README's picture: a window of WINDOW's size
        shot = tmp_path / "walkthrough_jupyterlab.png"
        _chromium(url, f"--screenshot={shot}")
        assert Image.open(shot).size == (width, height)
        shutil.copyfile(shot, SCREENSHOT)
