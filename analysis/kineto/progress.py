"""The progress bar shown while traces load: a widget in notebooks, text in terminals.

In a Jupyter kernel with ipywidgets, tqdm's widget bar; its output is emptied when the bar closes,
so that a saved notebook keeps no dead widget (JupyterLab would show "Error displaying widget:
model not found" on reopening it). In a kernel without ipywidgets, tqdm's text bar on stdout, where
``tqdm.auto`` would raise a red ``TqdmWarning`` box (and stderr shows as an error box too).
Elsewhere, tqdm's text bar on stderr. Only the loading process imports this (not the workers).
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from typing import Any

# Loads shorter than this (s) show no bar unless progress=True.
PROGRESS_DELAY_S = 1.0


def _widget_bar_class() -> type:
    from IPython.display import display
    from tqdm.notebook import tqdm as widget_bar

    class NotebookBar(widget_bar):
        """tqdm's widget bar, shown through a display handle that is emptied on close."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._handle = None
            super().__init__(*args, display=False, **kwargs)
            if not self.disable and self.delay <= 0:
                self._show()

        def _show(self) -> None:
            self._handle = display(self.container, display_id=True)
            self.displayed = True

        def display(self, *args: Any, check_delay: bool = True, **kwargs: Any):
            if check_delay and self.delay > 0 and not self.displayed:
                self._show()
            return super().display(*args, check_delay=check_delay, **kwargs)

        def close(self) -> None:
            finished = not (self.total and self.n < self.total)
            super().close()
            if self._handle is not None and finished and not self.leave:
                self._handle.update({"text/plain": ""}, raw=True)
                self._handle = None

    return NotebookBar


def bar_class() -> tuple[type, dict[str, Any]]:
    """The tqdm class for this process and its extra keyword arguments (see the module docstring)."""
    in_kernel = "ipykernel.zmqshell" in sys.modules
    if in_kernel and importlib.util.find_spec("ipywidgets") is not None:
        return _widget_bar_class(), {}
    from tqdm.std import tqdm as text_bar

    return text_bar, ({"file": sys.stdout} if in_kernel else {})


def progress_bar(total: int, progress: bool | None, desc: str = "loading traces"):
    """A bar over ``total`` files: ``progress`` None shows it only after PROGRESS_DELAY_S, True
    at once, False never (a null context then, yielding None)."""
    if progress is False:
        return contextlib.nullcontext(None)
    bar, options = bar_class()
    delay = 0.0 if progress else PROGRESS_DELAY_S
    return bar(total=total, desc=desc, unit="file", delay=delay, leave=False, **options)
