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
# C++-only stacks: the ATen operator that allocated, and the frames that only allocate.
_ATEN_OPERATOR = "at::_ops::"
_ALLOCATOR_PARTS = ("CachingAllocator", "memory_snapshot.cpp", "empty_generic", "empty_cuda",
                    "_empty_generic", "create_out", "allocate_or_resize_outputs")
# Python source inside these directories is library code, not the user's.
_LIBRARY_PARTS = ("/torch/", "/site-packages/", "/dist-packages/", "<frozen ")


def frame_label(frame: Mapping) -> str:
    """``file.py:line:function``, as torch's viewer prints a Python frame (file name without its
    folder, ``/`` or Windows' ``\\``); a C++ frame by its function without the argument list,
    and its file when known: ``at::_ops::bmm::redispatch`` (``??:0:...(c10::DispatchKeySet, ...)``
    in the viewer)."""
    filename = str(frame.get("filename", "?")).replace("\\", "/").rsplit("/", 1)[-1]
    name = str(frame.get("name", "?"))
    if filename.endswith(".py") or filename.startswith("<"):
        return f"{filename}:{frame.get('line', 0)}:{name}"
    function = _without_arguments(name)
    return function if filename in ("", "?", "??") else f"{function} ({filename})"


def _without_arguments(name: str) -> str:
    """A C++ signature without its trailing argument list (and qualifiers such as ``const``):
    ``at::(anonymous namespace)::f(at::Tensor const&) const`` → ``at::(anonymous namespace)::f``."""
    end = name.rfind(")")
    depth = 0
    for i in range(end, -1, -1):
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0:
            return name[:i].rstrip() or name
    return name


# Kinds of frame, from a frame's (filename, function): hidden by the viewer, C++ or other,
# Python inside a library, Python of the user.
_HIDDEN, _NATIVE, _LIBRARY, _USER = range(4)


@lru_cache(maxsize=65536)  # a run has few distinct frames and 100k+ allocations: classify each once
def _kind(filename: str, name: str) -> int:
    filename = filename.replace("\\", "/")  # Windows paths: ...\Lib\site-packages\torch\...
    if any(o in name for o in _OMIT_FUNCTIONS) or any(o in filename for o in _OMIT_FILENAMES):
        return _HIDDEN
    if not filename.endswith(".py"):
        return _NATIVE
    if filename.startswith("torch/") or any(p in filename.lower() for p in _LIBRARY_PARTS):
        return _LIBRARY
    return _USER


def top_user_frame(frames: Sequence[Mapping] | None) -> str:
    """The label of the innermost user frame in ``frames`` (innermost first).

    Falls back to the innermost Python frame (all of the stack is library code); on a C++-only
    stack (autograd's backward thread, C++ extensions) to the innermost ATen operator
    (``at::_ops::div_Tensor::call``: which operation allocated), else the innermost C++ frame
    outside the caching allocator (every stack starts in its ``malloc``, which names nothing);
    then to :data:`NO_STACK` when there are no frames at all.
    """
    if not frames or not isinstance(frames, list | tuple):  # a damaged field is no stack
        return NO_STACK
    first_python = first_op = first_native = first_shown = None
    for frame in frames:
        if not isinstance(frame, Mapping):
            continue
        name = str(frame.get("name", ""))
        kind = _kind(str(frame.get("filename", "")), name)
        if kind == _USER:
            return frame_label(frame)
        if kind == _LIBRARY and first_python is None:
            first_python = frame
        elif kind == _NATIVE:
            if first_shown is None:
                first_shown = frame
            if first_op is None and name.startswith(_ATEN_OPERATOR):
                first_op = frame
            if first_native is None and not _in_allocator(frame, name):
                first_native = frame
    chosen = first_python or first_op or first_native or first_shown
    return frame_label(chosen) if chosen is not None else NO_STACK


def _in_allocator(frame: Mapping, name: str) -> bool:
    """A frame of the allocation machinery itself (the caching allocator, empty tensors)."""
    return any(part in name or part in str(frame.get("filename", "")) for part in _ALLOCATOR_PARTS)
