"""Naming an allocation by the line of user code that made it: its *top user frame*.

A snapshot's ``frames`` list is innermost first: the allocator's C++ frames, then torch's own Python
(``torch/nn/modules/linear.py:...:forward``), then the model's code, then the training loop. The
top user frame is the innermost frame that is Python source outside the ``torch`` package and not
one of the interpreter frames that torch's viewer hides (``_memory_viz._frame_filter``). That is
the line a user can change: ``model.py:42:forward``, not ``linear.py:125:forward``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

# Label of an allocation with no stack (made before _record_memory_history started).
NO_STACK = "<allocated before recording began>"

# The frames torch's memory viewer omits (torch/cuda/_memory_viz.py, _frame_filter).
_OMIT_FUNCTIONS = (
    "unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
    "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_",
)  # fmt: skip
_OMIT_FILENAMES = (
    "core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c", "Objects/call.c",
    "Objects/methodobject.c", "pycore_ceval.h", "ceval.c", "cpython/abstract.h",
)  # fmt: skip
# Python source inside these directories is library code, not the user's.
_LIBRARY_PARTS = ("/torch/", "/site-packages/", "/dist-packages/", "<frozen ")


def frame_label(frame: Mapping) -> str:
    """``file.py:line:function``, as torch's viewer prints a frame (file name without its folder)."""
    filename = str(frame.get("filename", "?"))
    return f"{filename.rsplit('/', 1)[-1]}:{frame.get('line', 0)}:{frame.get('name', '?')}"


# Kinds of frame, from a frame's (filename, function): hidden by the viewer, C++ or other,
# Python inside a library, Python of the user.
_HIDDEN, _NATIVE, _LIBRARY, _USER = range(4)


@lru_cache(maxsize=65536)  # a run has few distinct frames and 100k+ allocations: classify each once
def _kind(filename: str, name: str) -> int:
    if any(o in name for o in _OMIT_FUNCTIONS) or any(o in filename for o in _OMIT_FILENAMES):
        return _HIDDEN
    if not filename.endswith(".py"):
        return _NATIVE
    if filename.startswith("torch/") or any(p in filename for p in _LIBRARY_PARTS):
        return _LIBRARY
    return _USER


def top_user_frame(frames: Sequence[Mapping] | None) -> str:
    """The label of the innermost user frame in ``frames`` (innermost first).

    Falls back to the innermost Python frame (all of the stack is library code), then to the
    innermost shown frame (C++ only), then to :data:`NO_STACK` when there are no frames at all.
    """
    if not frames or not isinstance(frames, list | tuple):  # a damaged field is no stack
        return NO_STACK
    first_python = first_shown = None
    for frame in frames:
        if not isinstance(frame, Mapping):
            continue
        kind = _kind(str(frame.get("filename", "")), str(frame.get("name", "")))
        if kind == _USER:
            return frame_label(frame)
        if kind == _LIBRARY and first_python is None:
            first_python = frame
        elif kind == _NATIVE and first_shown is None:
            first_shown = frame
    chosen = first_python or first_shown
    return frame_label(chosen) if chosen is not None else NO_STACK
