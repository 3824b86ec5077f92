"""Python-level profiles from py-spy: read ``py-spy record -f raw`` files and say where the samples go.

When the GPU idles waiting on the host, the answer is in Python; py-spy samples it. Its ``raw``
format (Brendan Gregg's *collapsed stacks*) has one distinct stack per line, outermost frame first,
frames ``function (file:line)`` separated by ``;`` and the number of samples at the end::

    <module> (train.py:70);main (train.py:62);step (torch/nn/modules/module.py:1511) 84

``--subprocesses`` prefixes each stack with ``process PID:"COMMAND LINE"`` (one per ancestor),
``--threads`` with ``thread (TID)`` or ``thread (TID): NAME``; ``--native`` adds C frames such as
``0x7f... (libc.so.6)`` that have no line number; a stack with no Python frame is written as an
empty stack (`` 3``). All of these are read; a command line py-spy writes verbatim may span several
lines (``python -c "<code with newlines>"``, as torch inductor starts its workers): such a stack is
read as one, its newlines kept as ``\n``. Thread ids are decimal, or hexadecimal (``0x16DF7B000``)
on macOS. One file per node (``profile_node$SLURM_NODEID.txt``) is the usual way to profile a
multi-node job; pass all of them to combine.

py-spy's speedscope JSON (``py-spy record -f speedscope``) is read too: one profile per thread
(``Thread 67525 "MainThread"``, ``Process 6106 Thread 6112 "worker"``, or only the thread's name
in older py-spy), each sample a list of frame indices, outermost first. Every sample counts once
(its weight is the sampling interval); a profile in ``"unit": "none"`` counts its weights (samples
merged by whoever wrote it). The command lines are not in that format.

Caveat on shares: py-spy takes one sample per *process and thread* at each tick, so with
``--subprocesses`` (torchrun's workers) or ``--threads`` a tick counts once per process/thread that
was active. Shares are therefore shares of process-samples, not of wall time; eight workers busy in
the same function for 1 s weigh eight times one worker.

``read_pyspy`` parses one file into a ``PySpyProfile``; ``pyspy_report`` and ``call_tree`` are
analyses over one or more profiles (they accept paths too and read them first).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from analysis.arguments import on_error_choice
from analysis.errors import ConfigError, CorruptInputError
from analysis.io import gunzip_bounded, read_input_bytes

_I64_MAX = 2**63 - 1
NOT_FOUND = "not found"  # library columns of a stack with no frame in the library
NO_FRAMES = "<no Python frames>"  # leaf of py-spy's empty stacks (process sampled, no Python frame)

# --subprocesses / --threads prefixes, which py-spy writes as the outermost "frames".
_PROCESS_RE = r'^process (?P<pid>\d+):"(?P<cmd>.*)"$'
# py-spy writes a thread id in hex (0x...) on macOS, and where it knows no native id
_THREAD_RE = r"^thread \((?P<tid>0[xX][0-9a-fA-F]+|\d+)\)(?:: (?P<name>.*))?$"
# speedscope profile names: 'Thread 67525 "MainThread"', 'Process 6106 Thread 6112 "worker"'
_SPEEDSCOPE_THREAD = re.compile(
    r'^(?:Process (?P<pid>\d+) )?Thread (?P<tid>0[xX][0-9a-fA-F]+|\d+)(?: "(?P<name>.*)")?$')
# a process prefix whose quoted command line does not end on its line (it holds newlines)
_OPEN_COMMAND = re.compile(r'(?:^|;)process \d+:"[^"\n]*$', re.M)
_COMMAND_OPENER = re.compile(r'(?:^|;)process \d+:"')
_COMMAND_CLOSE = re.compile(r'";|" \d+$')
_MAX_COMMAND_LINES = 1000  # physical lines one command line may span
# A Python function name cannot contain " (", so the first " (" ends the name (paths may hold one).
_FRAME_RE = r"^(?P<function>.*?) \((?P<location>.*)\)$"
_LOCATION_RE = r"^(?P<path>.*):(?P<line>\d+)$"


@dataclass(frozen=True)
class PySpyProfile:
    """One py-spy raw file, decoded.

    - ``stacks``: one row per line of the file that holds samples: ``samples`` (int64),
      ``process`` (int64 pid of the innermost ``process`` prefix, -1 without ``-s``),
      ``process_command`` (str), ``thread`` (int64 tid, -1 without ``--threads``), ``thread_name``
      (str), ``line`` (int64, 1-based line number in the file).
    - ``frames``: one row per frame of each stack, sorted by ``stack`` then ``depth``: ``stack``
      (int64 row of ``stacks``), ``depth`` (int64, 0 = outermost), ``function_id`` (int64 row of
      ``functions``).
    - ``functions``: the distinct frames: ``function``, ``path`` (str, as py-spy prints it,
      usually relative to ``sys.path``), ``line`` (int64, -1 for native frames).

    From a speedscope file: one ``stacks`` row per distinct stack of a thread's profile,
    ``process_command`` empty (not in the format) and ``line`` -1.
    """

    source: str
    stacks: pd.DataFrame
    frames: pd.DataFrame
    functions: pd.DataFrame
    skipped_lines: int = 0

    @property
    def total_samples(self) -> int:
        return int(self.stacks["samples"].sum())

    @property
    def name(self) -> str:
        """The file name without its folder (``profile_node3.txt``), used to label rows by node."""
        return os.path.basename(self.source.rstrip("/")) or self.source


def read_pyspy(
    path: str | os.PathLike,
    *,
    on_error: str = "raise",
    storage_options: Mapping[str, Any] | None = None,
) -> PySpyProfile:
    """Read one py-spy file, raw or speedscope JSON (local path or fsspec URL such as ``gs://``;
    gzip is detected).

    A malformed line raises ``CorruptInputError`` naming the file and line number; with
    ``on_error="skip"`` it is skipped and counted in ``skipped_lines``. A file of another kind
    (an SVG flame graph, ``py-spy dump`` output, other JSON) raises either way.
    """
    source = os.fspath(path)
    data = gunzip_bounded(read_input_bytes(source, storage_options, trace=False), source)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptInputError(
            source, f"not text (byte {exc.start} is not UTF-8); expected `py-spy record -f raw` output"
        ) from exc
    return parse_pyspy(text, source=source, on_error=on_error)


def parse_pyspy(text: str, source: str = "<text>", on_error: str = "raise") -> PySpyProfile:
    """Decode the text of a py-spy raw or speedscope file (see the module docstring)."""
    on_error_choice(on_error)
    head = text.lstrip()[:80]
    if head.startswith("{"):
        return _from_speedscope(text, source)
    other = _other_kind(head)
    if other is not None:  # not a malformed line of a raw file: the whole file is something else
        raise CorruptInputError(source, f"line {_first_line(text)}: {other}")
    text, origin = _join_split_commands(text)
    # Split in Arrow, not in Python: a 100k-line file is ~100 MB of text. Arrow's string kernels
    # are ~15x slower on large_string (pyarrow 26), so it is used only when 32-bit offsets may not do.
    kind = pa.string() if len(text) < 2**29 else pa.large_string()
    raw = pc.list_flatten(pc.split_pattern(pa.array([text], kind), "\n"))
    body = pc.utf8_rtrim_whitespace(raw)  # \r of Windows line ends, trailing blanks
    keep = pc.not_equal(body, "")
    body = body.filter(keep)
    line_numbers = np.flatnonzero(keep.to_numpy(zero_copy_only=False)) + 1
    if origin is not None:  # lines joined by _join_split_commands: their first line in the file
        line_numbers = origin[line_numbers - 1]
    # "<stack> <count>": split at the last space; py-spy's empty stack is " <count>".
    halves = pc.split_pattern(body, " ", max_splits=1, reverse=True)
    two = pc.equal(pc.list_value_length(halves), 2)
    valid = two.to_numpy(zero_copy_only=False).copy()
    digits = pc.match_substring_regex(pc.list_element(halves.filter(two), 1), r"^\d{1,18}$")
    valid[valid] = digits.to_numpy(zero_copy_only=False)
    # py-spy never writes a comment: a "# ..." line is not a stack, whatever number ends it
    valid &= ~pc.starts_with(body, "#").to_numpy(zero_copy_only=False)
    skipped = int(len(valid) - valid.sum())
    if skipped:
        if on_error == "raise":
            first = int(np.flatnonzero(~valid)[0])
            raise CorruptInputError(
                source, f"line {line_numbers[first]}: {_why_malformed(body[first].as_py())}"
            )
        halves = halves.filter(pa.array(valid))
        line_numbers = line_numbers[valid]
    if len(halves) == 0:
        reason = "no samples: the file is empty" if not skipped else "no valid line"
        raise CorruptInputError(source, f"{reason}; expected `py-spy record -f raw` output")
    stack_text, count = pc.list_element(halves, 0), pc.list_element(halves, 1)
    samples = pc.cast(count, pa.int64()).to_numpy()
    # each count has at most 18 digits, but their sum can still pass int64 (and wrap around)
    if sum(samples.tolist()) > _I64_MAX:
        raise CorruptInputError(
            source, f"the sample counts add up to more than {_I64_MAX} (2**63 - 1): not a real profile"
        )

    lists = pc.split_pattern(stack_text, ";")
    flat = pc.list_flatten(lists)
    owner = pc.list_parent_indices(lists)
    nonempty = pc.not_equal(flat, "")
    flat, owner = flat.filter(nonempty), owner.filter(nonempty).to_numpy().astype(np.int64)
    encoded = pc.dictionary_encode(flat)
    codes = encoded.indices.to_numpy().astype(np.int64)
    distinct = encoded.dictionary
    n = len(samples)
    prefixes = _PrefixFrames(distinct, source)
    stacks = pd.DataFrame(
        {
            "samples": samples,
            "process": np.full(n, -1, np.int64),
            "process_command": pd.array([""] * n, dtype="str"),
            "thread": np.full(n, -1, np.int64),
            "thread_name": pd.array([""] * n, dtype="str"),
            "line": line_numbers.astype(np.int64),
        }
    )
    if prefixes.any:
        # --subprocesses / --threads prefixes are frames to py-spy; make them columns of the stack.
        prefixes.assign(stacks, owner, codes)
        is_frame = ~prefixes.mask[codes]
        owner, codes = owner[is_frame], prefixes.renumber[codes[is_frame]]
        distinct = distinct.filter(pa.array(~prefixes.mask))
    frames = _frame_table(owner, codes, n)
    return PySpyProfile(source, stacks, frames, _decode_frames(distinct, source), int(skipped))


def _frame_table(owner: np.ndarray, codes: np.ndarray, n_stacks: int) -> pd.DataFrame:
    """``PySpyProfile.frames`` from each frame's stack (``owner``, sorted) and function id: a
    frame's depth is its distance from its stack's first frame."""
    starts = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=n_stacks))[:-1]])
    depth = np.arange(len(owner), dtype=np.int64) - starts[owner]
    return pd.DataFrame({"stack": owner, "depth": depth, "function_id": codes})


def _join_split_commands(text: str) -> tuple[str, np.ndarray | None]:
    """``text`` with each command line that spans several physical lines joined into its stack's
    line (its newlines written ``\\n``), and per line of the result its first line in ``text``
    (1-based; None when nothing was joined). py-spy writes ``process PID:"COMMAND"`` verbatim, so
    ``python -c "<code>"`` with newlines in the code cuts the stack after ``-c``."""
    if _OPEN_COMMAND.search(text) is None:
        return text, None
    lines = text.split("\n")
    out, origin = [], []
    i = 0
    while i < len(lines):
        line, first = lines[i], i
        while _command_open(line) and i + 1 < len(lines) and i - first < _MAX_COMMAND_LINES:
            i += 1
            line += "\\n" + lines[i]
        out.append(line)
        origin.append(first + 1)
        i += 1
    return "\n".join(out), np.array(origin, dtype=np.int64)


def _command_open(line: str) -> bool:
    """Does the last ``process PID:"`` of ``line`` start a command line that does not end on it."""
    openers = list(_COMMAND_OPENER.finditer(line))
    return bool(openers) and _COMMAND_CLOSE.search(line, openers[-1].end()) is None


def _first_line(text: str) -> int:
    """The 1-based number of the first line that is not blank."""
    return text[: len(text) - len(text.lstrip())].count("\n") + 1


def _from_speedscope(text: str, source: str) -> PySpyProfile:
    """A speedscope file's sampled profiles (py-spy's ``-f speedscope``) as a :class:`PySpyProfile`."""
    try:
        doc = msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        raise CorruptInputError(
            source, f"invalid JSON ({exc}); expected py-spy's raw or speedscope output") from None
    except RecursionError:
        raise CorruptInputError(
            source, "JSON nested too deeply to be a speedscope file") from None
    shared = doc.get("shared") if isinstance(doc, dict) else None
    frames = shared.get("frames") if isinstance(shared, dict) else None
    if not isinstance(doc.get("profiles") if isinstance(doc, dict) else None, list) or not isinstance(
            frames, list):
        raise CorruptInputError(source, f"line {_first_line(text)}: {_other_kind('{')}")
    writer = doc.get("exporter") or "an unnamed exporter"
    sampled = [p for p in doc["profiles"] if isinstance(p, dict) and p.get("type") == "sampled"]
    if not sampled:
        kinds = sorted({str(p.get("type")) for p in doc["profiles"] if isinstance(p, dict)})
        raise CorruptInputError(
            source, f"a speedscope file without sampled profiles (written by {writer}; profiles: "
            f"{', '.join(kinds) or 'none'}); py-spy writes sampled profiles")
    try:
        functions = pd.DataFrame({
            "function": pd.array([str(f["name"]) for f in frames], dtype="str"),
            "path": pd.array([str(f.get("file") or "") for f in frames], dtype="str"),
            "line": np.array([_line_of(f.get("line")) for f in frames], dtype=np.int64),
        })
    except (TypeError, KeyError, AttributeError) as exc:
        raise CorruptInputError(
            source, f"speedscope frames: each needs a 'name' ({type(exc).__name__}: {exc})"
        ) from None
    rows, stack_frames = [], []
    for number, profile in enumerate(sampled):
        pid, tid, name = _speedscope_thread(str(profile.get("name", "")))
        samples, weights = profile.get("samples"), profile.get("weights")
        if not isinstance(samples, list) or not isinstance(weights, list) or len(weights) != len(
                samples):
            raise CorruptInputError(
                source, f"speedscope profile {number} ({profile.get('name')!r}): 'samples' and "
                "'weights' must be lists of the same length")
        merged = profile.get("unit") == "none"  # weights count samples merged by the writer
        counts: dict[tuple, int] = {}
        for stack, weight in zip(samples, weights, strict=True):
            if not isinstance(stack, list) or not all(
                    isinstance(f, int) and 0 <= f < len(frames) for f in stack):
                raise CorruptInputError(
                    source, f"speedscope profile {number}: a sample is not a list of frame "
                    f"indices below {len(frames)}: {str(stack)[:80]}")
            n = _merged_count(weight, source, number) if merged else 1
            counts[tuple(stack)] = counts.get(tuple(stack), 0) + n
        for stack, n in counts.items():
            stack_frames.append(stack)
            rows.append((n, pid, tid, name))
    if not rows:
        raise CorruptInputError(source, "no samples: the speedscope profiles are empty")
    total = sum(r[0] for r in rows)
    if total > _I64_MAX:
        raise CorruptInputError(
            source, f"the sample counts add up to more than {_I64_MAX} (2**63 - 1): not a real profile")
    stacks = pd.DataFrame({
        "samples": np.array([r[0] for r in rows], dtype=np.int64),
        "process": np.array([r[1] for r in rows], dtype=np.int64),
        "process_command": pd.array([""] * len(rows), dtype="str"),
        "thread": np.array([r[2] for r in rows], dtype=np.int64),
        "thread_name": pd.array([r[3] for r in rows], dtype="str"),
        "line": np.full(len(rows), -1, np.int64),
    })
    lengths = np.array([len(s) for s in stack_frames], dtype=np.int64)
    owner = np.repeat(np.arange(len(rows), dtype=np.int64), lengths)
    codes = np.fromiter((f for s in stack_frames for f in s), dtype=np.int64,
                        count=int(lengths.sum()))
    return PySpyProfile(source, stacks, _frame_table(owner, codes, len(rows)), functions, 0)


def _merged_count(weight, source: str, number: int) -> int:
    """A weight of a ``"unit": "none"`` profile as a count of samples; anything but a whole
    number ≥ 0 is damage, not a sample count."""
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not (
            0 <= weight <= _I64_MAX and weight == int(weight)):
        raise CorruptInputError(
            source, f"speedscope profile {number}: a weight of {weight!r} is no count of samples "
                    "('unit': 'none')")
    return int(weight)


def _line_of(value) -> int:
    """A frame's line number, -1 when it has none (native frames, ``--function``)."""
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _I64_MAX
    return int(value) if ok else -1


def _speedscope_thread(name: str) -> tuple[int, int, str]:
    """(pid, tid, thread name) of a py-spy speedscope profile's name; -1 where it has none."""
    m = _SPEEDSCOPE_THREAD.match(name)
    if m is None:  # older py-spy: the thread's name only
        return -1, -1, name
    pid = int(m["pid"]) if m["pid"] else -1
    return pid, _thread_id(m["tid"]), m["name"] or ""


def _thread_id(text: str) -> int:
    """A thread id as py-spy writes it, decimal or ``0x`` hex."""
    return int(text, 16) if text[:2] in ("0x", "0X") else int(text)


def _int64(digits: np.ndarray, source: str, what: str) -> np.ndarray:
    """Decimal (or ``0x`` hex) strings → int64; one beyond int64 is a ``CorruptInputError``."""
    values = [_thread_id(d) for d in digits]

    bad = [v for v in values if v > _I64_MAX]
    if bad:
        raise CorruptInputError(source, f"{what} of {bad[0]} does not fit in 64 bits")
    return np.array(values, dtype=np.int64)


class _PrefixFrames:
    """Which distinct frames are ``process PID:"CMD"`` / ``thread (TID): NAME`` prefixes."""

    def __init__(self, distinct: pa.Array, source: str):
        self.source = source
        self.process = pc.extract_regex(distinct, _PROCESS_RE)
        self.thread = pc.extract_regex(distinct, _THREAD_RE)
        is_process = self.process.is_valid().to_numpy(zero_copy_only=False)
        is_thread = self.thread.is_valid().to_numpy(zero_copy_only=False)
        self.is_process, self.is_thread = is_process, is_thread
        self.mask = is_process | is_thread
        self.any = bool(self.mask.any())
        self.renumber = np.cumsum(~self.mask) - 1  # old distinct index -> index among real frames

    def assign(self, stacks: pd.DataFrame, owner: np.ndarray, codes: np.ndarray) -> None:
        """Set the stacks' process/thread columns from their innermost prefix frames."""
        for mask, parsed, columns in (
            (self.is_process, self.process, (("process", "pid"), ("process_command", "cmd"))),
            (self.is_thread, self.thread, (("thread", "tid"), ("thread_name", "name"))),
        ):
            picked = mask[codes]
            # frames are in stack order, so the last assignment per stack is its innermost prefix
            stack_of, code_of = owner[picked], codes[picked]
            last = np.full(len(stacks), -1, np.int64)
            last[stack_of] = code_of
            has = last >= 0
            for column, field in columns:
                values = parsed.field(field).to_numpy(zero_copy_only=False)[last[has]]
                if stacks[column].dtype == np.int64:
                    values = _int64(values, self.source, f"a {field}")
                stacks.loc[has, column] = values


def _decode_frames(frames: pa.Array, source: str) -> pd.DataFrame:
    """``function (path:line)`` → function, path, line; ``name (lib.so)`` → line -1; bare → path ""."""
    parsed = pc.extract_regex(frames, _FRAME_RE)
    function = pc.if_else(parsed.is_valid(), parsed.field("function"), frames)
    location = pc.if_else(parsed.is_valid(), parsed.field("location"), "")
    located = pc.extract_regex(location, _LOCATION_RE)
    path = pc.if_else(located.is_valid(), located.field("path"), location)
    # an invalid row's field reads "", so choose the text before casting
    line_text = pc.if_else(located.is_valid(), located.field("line"), "-1")
    try:
        line = pc.cast(line_text, pa.int64()).to_numpy(zero_copy_only=False).astype(np.int64)
    except pa.ArrowInvalid:  # a line number beyond int64
        line = _int64(line_text.to_numpy(zero_copy_only=False), source, "a frame's line number")
    return pd.DataFrame(
        {
            "function": pd.array(function.to_pylist(), dtype="str"),
            "path": pd.array(path.to_pylist(), dtype="str"),
            "line": line,
        }
    )


def _other_kind(head: str) -> str | None:
    """What a file starting with ``head`` is when it is not py-spy's raw output (None: it may be)."""
    if head.startswith("<?xml") or head.startswith("<svg"):
        return "this is py-spy's SVG output; record with `py-spy record -f raw` (or speedscope)"
    if head.startswith("{"):
        return ("this is JSON but not a speedscope file (no 'profiles' and 'shared.frames'); "
                "expected py-spy's raw or speedscope output")
    if head.startswith("["):
        return "this is a JSON array (a Chrome trace?), not py-spy's raw or speedscope output"
    if re.match(r"Process \d+: ", head):
        return ("this is `py-spy dump` output (one snapshot of the stacks), not samples; record "
                "with `py-spy record -f raw`")
    return None


def _why_malformed(line: str) -> str:
    head = line.lstrip()[:80]
    return _other_kind(head) or f"expected '<frames separated by ;> <sample count>', got {head!r}"


def load_profiles(
    files: str | os.PathLike | PySpyProfile | Iterable[str | os.PathLike | PySpyProfile],
    *,
    on_error: str = "raise",
    storage_options: Mapping[str, Any] | None = None,
) -> list[PySpyProfile]:
    """One path, one profile, or several of either → a list of profiles (paths are read)."""
    if isinstance(files, str | os.PathLike | PySpyProfile):
        files = [files]
    if not isinstance(files, Iterable) or isinstance(files, bytes):
        raise ConfigError(f"py-spy files must be paths or PySpyProfiles, not {type(files).__name__}")
    files = list(files)
    bad = [f for f in files if not isinstance(f, str | os.PathLike | PySpyProfile)]
    if bad:
        raise ConfigError(f"py-spy files must be paths or PySpyProfiles, not {bad[0]!r}")
    profiles = [
        f if isinstance(f, PySpyProfile)
        else read_pyspy(f, on_error=on_error, storage_options=storage_options)
        for f in files
    ]
    if not profiles:
        raise ConfigError("no py-spy files given")
    return profiles


def _labels(profiles: list[PySpyProfile]) -> list[str]:
    """File names label the nodes; full sources when two files share a name (node0/x.txt, node1/x.txt)."""
    names = [p.name for p in profiles]
    return names if len(set(names)) == len(names) else [p.source for p in profiles]


def _library_mask(paths: pd.Series, library_name: str) -> np.ndarray:
    """Paths inside the library: ``torch`` matches ``torch/nn/x.py`` and ``/site-packages/torch/x.py``;
    ``torch.distributed`` matches ``torch/distributed/...``; ``six`` also matches ``six.py``.

    In a full path (``--full-filenames``) only what follows the last ``site-packages`` /
    ``dist-packages`` folder names a module, and a folder that holds a Python installation
    (``.../envs/torch/lib/python3.12/``, ``...\\torch\\Lib\\``) is an environment named like
    the library, not the library: ``inspect.py`` of a conda env called ``torch`` is not torch."""
    sep = r"[/\\]"
    parts = sep.join(re.escape(p) for p in library_name.strip(".").split("."))
    module = paths.str.replace(rf"^.*{sep}(?:site|dist)-packages{sep}", "", regex=True)
    inside = module.str.contains(rf"(?:^|{sep}){parts}(?:{sep}|\.py$|$)", regex=True)
    environment = module.str.contains(
        rf"(?:^|{sep}){parts}{sep}(?:lib(?:64)?{sep}python\d|Lib{sep}|bin{sep}|include{sep})",
        regex=True)
    return (inside & ~environment).to_numpy(dtype=bool)


def _last_per_stack(frames: pd.DataFrame, mask: np.ndarray, n_stacks: int) -> np.ndarray:
    """function_id of the deepest frame of each stack where ``mask`` holds, -1 where none does."""
    out = np.full(n_stacks, -1, np.int64)
    picked = frames[mask]
    # frames are sorted by (stack, depth): assigning in order leaves the deepest one per stack
    out[picked["stack"].to_numpy()] = picked["function_id"].to_numpy()
    return out


def pyspy_report(
    files: str | os.PathLike | PySpyProfile | Iterable[str | os.PathLike | PySpyProfile],
    library_name: str | None = None,
    aggregate_leaf_paths: bool = False,
    num_rows: int | None = None,
    *,
    on_error: str = "raise",
    storage_options: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Where the Python samples are: by leaf function and by the deepest frame in ``library_name``.

    One row per file and distinct (leaf frame, library frame): ``file`` (the file name, one per
    node), ``leaf_function``, ``leaf_path``, ``leaf_line`` (the innermost frame of the stack;
    ``<no Python frames>`` for py-spy's empty stacks), ``library_function``, ``library_path``,
    ``library_line`` (the deepest frame whose path lies in ``library_name``, ``"not found"`` / -1
    when no frame does; columns absent without ``library_name``), ``samples`` (count) and
    ``samples_pctg`` = 100 × samples / all samples of all files (%). Rows are sorted by samples,
    largest first; ``num_rows`` keeps the first ones.

    With ``aggregate_leaf_paths`` rows that share the leaf and library *function* (name and path)
    merge, whatever the line numbers; the ``*_line`` columns are then dropped. Samples of all
    processes and threads of a file add up (see the module docstring: a tick counts once per
    process/thread).
    """
    profiles = load_profiles(files, on_error=on_error, storage_options=storage_options)
    tables = [
        _stack_table(p, label, library_name) for p, label in zip(profiles, _labels(profiles), strict=True)
    ]
    table = pd.concat(tables, ignore_index=True)
    keys = ["file", "leaf_function", "leaf_path", "leaf_line"]
    if library_name is not None:
        keys += ["library_function", "library_path", "library_line"]
    if aggregate_leaf_paths:
        keys = [k for k in keys if not k.endswith("_line")]
    report = table.groupby(keys, sort=False, dropna=False, observed=True)["samples"].sum().reset_index()
    total = sum(p.total_samples for p in profiles)
    report["samples_pctg"] = 100.0 * report["samples"] / total
    report = report.sort_values(["samples", *keys], ascending=[False] + [True] * len(keys))
    if num_rows is not None:
        report = report.head(num_rows)
    return report.reset_index(drop=True)


def _stack_table(profile: PySpyProfile, label: str, library_name: str | None) -> pd.DataFrame:
    """One row per stack of ``profile`` with its leaf and library frames spelled out."""
    n = len(profile.stacks)
    frames, functions = profile.frames, profile.functions
    # The leaf is the last frame of each stack (frames are sorted by stack, depth).
    is_leaf = np.r_[frames["stack"].to_numpy()[1:] != frames["stack"].to_numpy()[:-1], True]
    leaf = _last_per_stack(frames, is_leaf if len(frames) else np.zeros(0, bool), n)
    table = {"file": np.full(n, label, object)}
    table |= _spell(functions, leaf, "leaf", NO_FRAMES, "")
    if library_name is not None:
        in_library = _library_mask(functions["path"], library_name)
        mask = in_library[frames["function_id"].to_numpy()]
        library = _last_per_stack(frames, mask, n)
        table |= _spell(functions, library, "library", NOT_FOUND, NOT_FOUND)
    table["samples"] = profile.stacks["samples"].to_numpy()
    return pd.DataFrame(table)


def _spell(functions: pd.DataFrame, ids: np.ndarray, prefix: str, none_name: str, none_path: str):
    found = ids >= 0
    safe = np.where(found, ids, 0)
    if len(functions) == 0:
        names = paths = np.full(len(ids), "", object)
        lines = np.full(len(ids), -1, np.int64)
    else:
        names = functions["function"].to_numpy(dtype=object)[safe]
        paths = functions["path"].to_numpy(dtype=object)[safe]
        lines = functions["line"].to_numpy()[safe]
    return {
        f"{prefix}_function": np.where(found, names, none_name),
        f"{prefix}_path": np.where(found, paths, none_path),
        f"{prefix}_line": np.where(found, lines, -1).astype(np.int64),
    }


def call_tree(
    files: str | os.PathLike | PySpyProfile | Iterable[str | os.PathLike | PySpyProfile],
    *,
    on_error: str = "raise",
    storage_options: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """The merged call tree of one or more profiles, as drawn by a flame graph.

    One row per node: ``node`` (int64 id), ``parent`` (int64, -1 for a file's root), ``depth``
    (0 = the file's root, 1 = outermost level), ``file``, ``function``, ``path``, ``line``,
    ``samples`` (samples whose stack passes through this node: inclusive count) and
    ``self_samples`` (samples whose stack ends here). A file's root node is named after the file
    and holds all its samples. Stacks with the same frames from the root down share nodes.

    As in py-spy's own flame graph, a file recorded with ``--subprocesses`` holding several
    processes has one node per process under its root (``process 1234: python train.py``), and
    one recorded with ``--threads`` holding several threads one node per thread under that
    (``thread 8268 (MainThread)``), so the workers' stacks are not merged into the main
    process's; these nodes have an empty ``path`` and ``line`` -1.
    """
    profiles = load_profiles(files, on_error=on_error, storage_options=storage_options)
    parts, next_id = [], 0
    for profile, label in zip(profiles, _labels(profiles), strict=True):
        part = _tree_of(profile, label, next_id)
        next_id += len(part)
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def _owner_levels(profile: PySpyProfile) -> tuple[np.ndarray, np.ndarray, np.ndarray, pd.DataFrame]:
    """The profile's frames (``stack``, ``depth``, ``function_id``) and functions, with a frame
    per process and then per thread put before each stack's outermost frame when the file holds
    several processes / threads (py-spy's own flame graph shows them as frames)."""
    stacks, frames, functions = profile.stacks, profile.frames, profile.functions
    stack = frames["stack"].to_numpy()
    depth = frames["depth"].to_numpy()
    function_id = frames["function_id"].to_numpy()
    levels = []
    process = stacks["process"].to_numpy()
    if len(np.unique(process)) > 1:
        # one node per process, named with its command line where a stack gives one
        command = stacks["process_command"].astype(str).str.replace(r"\s+", " ", regex=True)
        commands = command[command != ""].groupby(process[command.to_numpy(str) != ""]).first()
        text = {pid: "(no process)" if pid < 0 else f"process {pid}" + (
            f": {commands[pid]}" if pid in commands.index else "") for pid in set(process.tolist())}
        levels.append(np.array([text[pid] for pid in process.tolist()], dtype=object))
    thread = stacks["thread"].to_numpy()
    if len(np.unique(thread)) > 1:
        # one node per (process, thread id), named by the thread's name where py-spy gave one
        # (it writes some stacks of a thread without it); ids as py-spy prints them: decimal
        # (Linux's native ids), hex for the pointer-sized ones of macOS
        named = stacks.assign(thread_name=stacks["thread_name"].astype(str))
        names = named[named["thread_name"] != ""].groupby(["process", "thread"])["thread_name"].agg(
            lambda n: n.value_counts().index[0]).to_dict()
        labels = {}
        for key in zip(process.tolist(), thread.tolist(), strict=True):
            if key not in labels:
                tid = key[1]
                text = ("(no thread)" if tid < 0 else
                        f"thread {tid}" if tid < 2**32 else f"thread 0x{tid:X}")
                labels[key] = f"{text} ({names[key]})" if key in names else text
        levels.append(np.array([labels[k] for k in zip(process.tolist(), thread.tolist(),
                                                        strict=True)], dtype=object))
    if not levels:
        return stack, depth, function_id, functions
    n, added, extra = len(stacks), [], []
    for level, names in enumerate(levels):
        distinct, inverse = np.unique(np.asarray(names, dtype=str), return_inverse=True)
        added.append((np.arange(n), np.full(n, level), len(functions) + len(extra) + inverse))
        extra.extend(distinct.tolist())
    functions = pd.concat([functions, pd.DataFrame({
        "function": pd.array(extra, dtype="str"), "path": pd.array([""] * len(extra), dtype="str"),
        "line": np.full(len(extra), -1, np.int64)})], ignore_index=True)
    stack = np.concatenate([a[0] for a in added] + [stack])
    depth = np.concatenate([a[1] for a in added] + [depth + len(levels)])
    function_id = np.concatenate([a[2] for a in added] + [function_id])
    return stack, depth, function_id, functions


def _tree_of(profile: PySpyProfile, label: str, first_id: int) -> pd.DataFrame:
    samples = profile.stacks["samples"].to_numpy()
    stack, depth, function_id, functions = _owner_levels(profile)
    n_functions = max(len(functions), 1)
    node_of_stack = np.full(len(samples), first_id, np.int64)  # every stack starts at the root
    ids = [np.array([first_id])]
    parents = [np.array([-1])]
    funcs = [np.array([-1])]
    depths = [np.array([0])]
    inclusive = [np.array([samples.sum()])]
    next_id = first_id + 1
    # One pass per depth level: a node is (parent node, function) at that level.
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(depth.max() + 2 if len(depth) else 1))
    for d in range(len(bounds) - 1):
        rows = order[bounds[d] : bounds[d + 1]]
        if len(rows) == 0:
            continue
        key = node_of_stack[stack[rows]] * n_functions + function_id[rows]
        unique, inverse = np.unique(key, return_inverse=True)
        new = next_id + np.arange(len(unique))
        node_of_stack[stack[rows]] = new[inverse]
        ids.append(new)
        parents.append(unique // n_functions)
        funcs.append(unique % n_functions)
        depths.append(np.full(len(unique), d + 1))
        # integer sums: bincount's float64 weights lose counts above 2**53
        counts = np.zeros(len(unique), np.int64)
        np.add.at(counts, inverse, samples[stack[rows]])
        inclusive.append(counts)
        next_id += len(unique)
    node = np.concatenate(ids)
    parent = np.concatenate(parents)
    func = np.concatenate(funcs)
    total = np.concatenate(inclusive).astype(np.int64)
    children = np.zeros(len(node), np.int64)
    has_parent = parent >= 0
    np.add.at(children, parent[has_parent] - first_id, total[has_parent])
    spelled = _spell(functions, func, "f", label, "")
    return pd.DataFrame(
        {
            "node": node,
            "parent": parent,
            "depth": np.concatenate(depths).astype(np.int64),
            "file": label,
            "function": spelled["f_function"],
            "path": spelled["f_path"],
            "line": spelled["f_line"],
            "samples": total,
            "self_samples": total - children,
        }
    )
