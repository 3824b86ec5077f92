"""HolisticTraceAnalysis 0.5.0, the test oracle: its answers stored as snapshots, or run live.

By default the tests read HTA's answers from ``tests/data/hta_oracle/`` (no HTA parse, no pandas<3
venv: fast). ``scripts/hta_oracle_snapshot.py`` writes those snapshots by running the same tests
with HTA live and recording every answer HTA gives them (values, and the exceptions it raises).
The environment variable ``HTA_LIVE`` chooses:

- unset (or ``0``): stored answers; a question with no stored answer fails the test, naming the script;
- ``1``: HTA runs live, nothing is written (to confirm the snapshots against HTA itself);
- ``record``: HTA runs live and its answers are written (what the script sets).

A snapshot is keyed by the content (sha256) of the files HTA reads, so a changed trace or a
changed synthesiser cannot meet an old answer: its lookup misses and the test fails. Answers are
pickled as HTA returned them, so the tests compare with exactly the frames (values, dtypes,
index) the live HTA gave, with the same tolerances.

Live, each trace file is copied alone into a temporary directory first, because HTA treats every
JSON in a directory as a trace; HTA parses in its constructor, so one instance per directory and
options serves the whole session.
"""

from __future__ import annotations

import builtins
import gzip
import hashlib
import logging
import os
import pickle
import shutil
import tempfile
import warnings
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SNAPSHOTS = REPO_ROOT / "tests" / "data" / "hta_oracle"
SCRIPT = "scripts/hta_oracle_snapshot.py"
MODE = {"": "stored", "0": "stored", "1": "live", "record": "record"}.get(
    os.environ.get("HTA_LIVE", ""), "live"
)

_TMP: Path | None = None


def trace_files_of(trace_dir: Path) -> list[Path]:
    """The Kineto trace files HTA should read in a directory (execution traces left out)."""
    return sorted(
        p
        for p in Path(trace_dir).iterdir()
        if p.is_file() and p.name.endswith((".json", ".json.gz")) and "_et." not in p.name
    )


def _label(path: Path) -> str:
    """A readable name for an input: its path under ../shared/traces or the checkout, else (a
    temporary directory) its first trace file's name."""
    from conftest import SHARED_TRACES

    path = Path(path).resolve()
    for root in (Path(SHARED_TRACES).resolve(), REPO_ROOT):
        if path.is_relative_to(root):
            rel = path.relative_to(root).as_posix()
            break
    else:
        first = path if path.is_file() else next(iter(trace_files_of(path)), path)
        rel = first.name
    for suffix in (".json.gz", ".json"):
        rel = rel.removesuffix(suffix)
    return rel.replace("/", "__")


def _digest(inputs: Sequence[Path], options: str) -> str:
    """sha256 over what HTA reads: each input's trace files (names and content, gzip's header
    with its time stamp left out) and the options."""
    h = hashlib.sha256(options.encode())
    for path in map(Path, inputs):
        for f in [path] if path.is_file() else trace_files_of(path):
            data = f.read_bytes()
            if f.name.endswith(".gz"):
                data = gzip.decompress(data)
            h.update(f.name.encode() + b"\0" + data)
    return h.hexdigest()[:16]


class _Snapshot:
    """The stored answers for one set of inputs: ``{question: answer}`` in one gzipped pickle."""

    def __init__(self, inputs: Sequence[Path], options: str = "", name: str | None = None):
        self.inputs = [str(p) for p in inputs]
        name = name or "+".join(_label(Path(p)) for p in inputs)
        self.path = SNAPSHOTS / f"{name}__{_digest(inputs, options)}.pkl.gz"
        self._answers: dict[str, tuple] | None = None

    @property
    def answers(self) -> dict[str, tuple]:
        if self._answers is None:
            self._answers = (
                pickle.loads(gzip.decompress(self.path.read_bytes())) if self.path.exists() else {}
            )
        return self._answers

    def answer(self, question: str, live: Callable[[], Any]):
        """HTA's answer to ``question``: stored, or ``live()`` (recorded in ``record`` mode)."""
        if MODE == "stored":
            if question not in self.answers:
                pytest.fail(
                    f"no stored HTA answer to {question} on {', '.join(self.inputs)} "
                    f"({self.path.name}): run `python {SCRIPT}` to regenerate the snapshots"
                )
            return _replay(self.answers[question])
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = live()
        except Exception as exc:
            self._record(question, ("raise", type(exc).__module__, type(exc).__name__, str(exc)))
            raise
        self._record(question, ("value", pickle.dumps(result, protocol=5)))
        return result

    def _record(self, question: str, answer: tuple) -> None:
        if MODE != "record":
            return
        self.answers[question] = answer
        SNAPSHOTS.mkdir(parents=True, exist_ok=True)
        self.path.write_bytes(gzip.compress(pickle.dumps(self.answers, protocol=5), mtime=0))


def _replay(answer: tuple):
    if answer[0] == "value":
        return pickle.loads(answer[1])  # a fresh copy per question: tests may modify it
    _, module, name, message = answer
    if module == "builtins" and isinstance(getattr(builtins, name, None), type):
        raise getattr(builtins, name)(message)
    raise type(name, (Exception,), {"__module__": module})(message)  # HTA's own exception type


def _question(path: tuple[str, ...], args: tuple, kwargs: dict) -> str:
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in sorted(kwargs.items())]
    return f"{'.'.join(path)}({', '.join(parts)})"


class _Answers:
    """Stands for HTA's ``TraceAnalysis`` (or one of its attributes, ``path``): each call is a
    question answered from the snapshot or by the live object."""

    def __init__(self, snapshot: _Snapshot, live: Callable[[], Any], path: tuple[str, ...] = ()):
        self._snapshot, self._live, self._path = snapshot, live, path

    def __getattr__(self, name: str) -> _Answers:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Answers(self._snapshot, self._live, (*self._path, name))

    def computed(self, question: str, fn: Callable[[Any], Any]):
        """``fn(HTA's TraceAnalysis)``, stored as the answer to ``question``: for answers read from
        HTA's internals that are much smaller than the frames they come from."""
        return self._snapshot.answer(question, lambda: fn(self._live()))

    def __call__(self, *args, **kwargs):
        def live():
            target = self._live()
            for name in self._path:
                target = getattr(target, name)
            return target(*args, **kwargs)

        return self._snapshot.answer(_question(self._path, args, kwargs), live)


@cache
def _live_analysis(trace_dir: str, include_last_profiler_step: bool):
    global _TMP
    hta_ta = pytest.importorskip("hta.trace_analysis")
    logging.getLogger("hta").setLevel(logging.ERROR)
    _TMP = _TMP or Path(tempfile.mkdtemp(prefix="hta-oracle-"))
    src = Path(trace_dir)
    dst = _TMP / f"{src.name}-{abs(hash(str(src)))}"
    if not dst.exists():
        dst.mkdir(parents=True)
        for f in trace_files_of(src):
            shutil.copy(f, dst / f.name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return hta_ta.TraceAnalysis(
            trace_dir=str(dst), include_last_profiler_step=include_last_profiler_step
        )


@cache
def hta_analysis(trace_dir: str, include_last_profiler_step: bool = False) -> _Answers:
    """HTA's ``TraceAnalysis`` over the trace files of ``trace_dir``: its methods (and those of its
    attributes, e.g. ``.t.get_ranks()``) answer as HTA 0.5.0 does, from the snapshot by default."""
    snapshot = _Snapshot([Path(trace_dir)], f"include_last_profiler_step={include_last_profiler_step}")
    return _Answers(snapshot, lambda: _live_analysis(str(trace_dir), include_last_profiler_step))


def hta_answer(inputs: Sequence[Path], question: str, live: Callable[[], Any],
               name: str | None = None):
    """HTA's answer to ``question`` over the files ``inputs`` (directories or files; the snapshot
    is named after them, or ``name``), where ``live()`` asks HTA itself (only called when
    ``HTA_LIVE`` is set)."""
    return _Snapshot(list(inputs), name=name).answer(question, live)
