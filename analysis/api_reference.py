"""The typed API, written out: ``analysis/api.pyi`` (the stub editors and type checkers read) and
``docs/api.md`` (the reference page), both from one source.

The generated ``get_*`` methods come from the analysis registry (each entry's ``Param.type``,
``Param.description``, ``returns`` and ``columns``: :meth:`analysis.registry.Analysis.method_doc`);
the hand-written members of :class:`analysis.api.TraceAnalysis` from their own annotations and
docstrings. ``scripts/make-api-stub.py`` writes both files; ``tests/unit/test_api_stub.py`` fails
when the committed files differ from what this module generates (the registry changed and the
script was not run), or when an annotation names something the stub does not import.
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from analysis import analyses as catalogue
from analysis.api import TraceAnalysis
from analysis.registry import ANNOTATION_NAMES, Analysis

STUB_PATH = "analysis/api.pyi"
DOC_PATH = "docs/api.md"
GENERATED_BY = "scripts/make-api-stub.py"

# The stub's imports: the names TraceAnalysis's own annotations use, then the registry's.
_HEADER_IMPORTS = {
    "os": "os",
    "Iterable": "collections.abc", "Mapping": "collections.abc", "Sequence": "collections.abc",
    "Any": "typing", "Literal": "typing",
    "pd": "pandas",
    "Engine": "analysis.engines",
    "LoadOptions": "analysis.io",
    "Trace": "analysis.kineto.model",
    "KernelPatterns": "analysis.metrics.kernel_types",
    "Rounding": "analysis.metrics.timebase",
}
RANK_SPEC = "int | Iterable[int] | str | None"  # analysis.api.RankSpec
_SPECIAL = ("__init__", "__repr__", "_repr_html_")


def _imports() -> dict[str, str]:
    return {**_HEADER_IMPORTS, **ANNOTATION_NAMES}


def _import_lines(body: str) -> list[str]:
    """The imports of the names ``body`` uses: ``import os``, ``from typing import ...``,
    ``import pandas as pd``, ``from analysis... import ...``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(body)):
        annotations = []
        if isinstance(node, ast.arg | ast.AnnAssign):
            annotations.append(node.annotation)
        elif isinstance(node, ast.FunctionDef):
            annotations.append(node.returns)
        elif isinstance(node, ast.Assign):  # RankSpec = ...
            annotations.append(node.value)
        names |= {n.id for a in annotations if a is not None
                  for n in ast.walk(a) if isinstance(n, ast.Name)}
    used = {n: m for n, m in _imports().items() if n in names}
    grouped: dict[str, list[str]] = {}
    for name, module in used.items():
        if name not in (module, "pd"):
            grouped.setdefault(module, []).append(name)
    stdlib = sorted(m for m in grouped if not m.startswith("analysis"))
    return [
        *(["import os"] if "os" in used else []),
        *(f"from {m} import {', '.join(sorted(grouped[m]))}" for m in stdlib),
        "",
        *([f"import {used['pd']} as pd", ""] if "pd" in used else []),
        *(f"from {m} import {', '.join(sorted(grouped[m]))}"
          for m in sorted(grouped) if m not in stdlib),
    ]


def _namespace() -> dict[str, Any]:
    """The stub's names, imported for real: every annotation must evaluate in it."""
    import importlib

    ns: dict[str, Any] = {}
    for name, module in _imports().items():
        mod = importlib.import_module(module)
        ns[name] = mod if name == module or name == "pd" else getattr(mod, name)
    ns["RankSpec"] = eval(RANK_SPEC, ns)  # noqa: S307 - our own annotation text
    ns["TraceAnalysis"] = TraceAnalysis
    return ns


def _checked(annotation: str, where: str, ns: dict[str, Any]) -> str:
    try:
        eval(annotation, ns)  # noqa: S307 - annotation text from this package
    except Exception as exc:  # noqa: BLE001 - re-raised with where it is
        raise ValueError(f"{where}: annotation {annotation!r} does not evaluate with the stub's "
                         f"imports ({exc}); add the name to registry.ANNOTATION_NAMES") from exc
    return annotation


def _default(value: Any, stub: bool) -> str:
    if value is None or isinstance(value, bool | int | float | str):
        return repr(value)
    return "..." if stub else repr(value)


def _signature(sig: inspect.Signature, where: str, ns: dict[str, Any], stub: bool = True) -> str:
    """``(self, a: T = d, *, b: U = e) -> R`` as source text, every annotation checked."""
    parts: list[str] = []
    star = False
    for p in sig.parameters.values():
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        if p.kind is p.VAR_POSITIONAL:
            star = True
        text = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name
        if p.annotation is not p.empty:
            text += f": {_checked(p.annotation, where, ns)}"
        if p.default is not p.empty:
            text += (" = " if p.annotation is not p.empty else "=") + _default(p.default, stub)
        parts.append(text)
    ret = ""
    if sig.return_annotation is not sig.empty:
        ret = f" -> {_checked(sig.return_annotation, where, ns)}"
    return f"({', '.join(parts)}){ret}"


def _def(name: str, sig: str, indent: str = "    ") -> str:
    """``def name(...) -> R:``, one parameter a line when it is longer than 100 characters."""
    line = f"{indent}def {name}{sig}:"
    if len(line) <= 100:
        return line
    head, _, ret = sig.rpartition(")")
    params = _split_params(head[1:])
    inner = indent + "    "
    return "\n".join([f"{indent}def {name}(", *(f"{inner}{p}," for p in params),
                      f"{indent}){ret}:"])


def _split_params(text: str) -> list[str]:
    """``a: T = d, b: dict[str, int]`` split on the commas outside brackets and quotes."""
    out, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    return [*out, text[start:].strip()] if text.strip() else out


def _docstring(doc: str | None, indent: str) -> list[str]:
    if not doc:
        return []
    doc = inspect.cleandoc(doc).replace("\\", "\\\\")
    lines = doc.splitlines()
    body = [indent + line if line else "" for line in lines]
    body[0] = indent + '"""' + lines[0]
    return [*body, indent + '"""'] if len(lines) > 1 else [body[0] + '"""']


def _generated_methods() -> list[tuple[str, Analysis]]:
    """``(method name, entry)`` of every generated method, aliases after their method."""
    return [(name, spec) for spec in catalogue.analyses().values()
            for name in (spec.method, *spec.method_aliases)]


def _hand_written() -> list[tuple[str, Any]]:
    """TraceAnalysis's own members in definition order: public ones and ``__init__``/reprs."""
    generated = {name for name, _ in _generated_methods()}
    return [(name, member) for name, member in vars(TraceAnalysis).items()
            if name not in generated and (not name.startswith("_") or name in _SPECIAL)
            and (callable(member) or isinstance(member, property | classmethod | staticmethod))]


def _hand_written_stub(name: str, member: Any, ns: dict[str, Any]) -> list[str]:
    where = f"TraceAnalysis.{name}"
    if isinstance(member, property):
        sig = inspect.signature(member.fget)
        return ["    @property", _def(name, _signature(sig, where, ns)),
                *(_docstring(member.__doc__, "        ") or ["        ..."])]
    decorator = []
    if isinstance(member, classmethod):
        decorator, member = ["    @classmethod"], member.__func__
    elif isinstance(member, staticmethod):
        decorator, member = ["    @staticmethod"], member.__func__
    sig = inspect.signature(member)
    if name == "__init__" and sig.return_annotation is sig.empty:
        sig = sig.replace(return_annotation="None")
    return [*decorator, _def(name, _signature(sig, where, ns)),
            *(_docstring(member.__doc__, "        ") or ["        ..."])]


def stub_text() -> str:
    """The contents of ``analysis/api.pyi``."""
    ns = _namespace()
    lines = [
        f"RankSpec = {RANK_SPEC}",
        "",
        "class TraceAnalysis:",
        *_docstring(TraceAnalysis.__doc__, "    "),
        "",
    ]
    for attr, annotation in TraceAnalysis.__annotations__.items():
        lines.append(f"    {attr}: {_checked(annotation, f'TraceAnalysis.{attr}', ns)}")
    lines.append("")
    for name, member in _hand_written():
        lines += [*_hand_written_stub(name, member, ns), ""]
    lines.append("    # ---- the analyses: one method per registry entry (analysis.analyses)")
    for name, _ in _generated_methods():
        method = getattr(TraceAnalysis, name)
        sig = _signature(inspect.signature(method), f"TraceAnalysis.{name}", ns)
        lines += [_def(name, sig), *_docstring(method.__doc__, "        "), ""]
    body = "\n".join(lines).rstrip() + "\n"
    head = [
        f'"""Type stub of :mod:`analysis.api`: generated by ``{GENERATED_BY}`` from the analysis',
        "registry (each entry's ``Param.type``, ``returns``) and ``TraceAnalysis``'s own",
        'annotations. Do not edit: change the registry or api.py and run the script."""',
        "",
        *_import_lines(body),
        "",
    ]
    return "\n".join(head) + "\n" + body


# ------------------------------------------------------------------------------- docs/api.md
def _md_escape(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _where(spec: Analysis) -> str:
    return {"section": "report section", "lead": "report (lead)", "context": "report table",
            "none": "API only"}[spec.placement]


def _md_analysis(spec: Analysis, ns: dict[str, Any]) -> list[str]:
    method = getattr(TraceAnalysis, spec.method)
    sig = _signature(inspect.signature(method), f"TraceAnalysis.{spec.method}", ns, stub=False)
    module = (spec.rank_step or spec.derive).__module__
    lines = [f"### `{spec.method}`", "", "```python", f"ta.{spec.method}{sig.replace('self, ', '', 1).replace('(self)', '()')}",
             "```", "", " ".join(spec.doc.split()), ""]
    if spec.params:
        lines += ["| Argument | Type | Default | Description |", "|---|---|---|---|"]
        lines += [f"| `{p.name}` | `{_md_escape(p.type)}` | `{p.default!r}` | "
                  f"{_md_escape(p.description)} |" for p in spec.params]
        lines.append("")
    lines.append(f"**Returns** `{_md_escape(spec.returns)}`"
                 + (f": {spec.columns_text()}" if spec.columns else "."))
    lines.append("")
    facts = [f"name `{spec.name}`", _where(spec), f"defined in `{module}`"]
    if spec.aliases:
        facts.append("earlier names " + ", ".join(f"`{a}`" for a in spec.aliases))
    if spec.method_aliases:
        facts.append("method aliases " + ", ".join(f"`{a}`" for a in spec.method_aliases))
    lines += ["Registry: " + "; ".join(facts) + ".", ""]
    return lines


def markdown_text() -> str:
    """The contents of ``docs/api.md``."""
    ns = _namespace()
    specs = list(catalogue.analyses().values())
    lines = [
        "# API reference: `TraceAnalysis`",
        "",
        f"<!-- Generated by {GENERATED_BY} from the analysis registry and analysis/api.py; do not "
        "edit (tests/unit/test_api_stub.py fails when it is out of date). -->",
        "",
        "`from analysis import TraceAnalysis`. Every analysis has one name, used by its registry "
        "entry, `ta.run(name)`, the report's section and `trace-analysis report --analyses`; its "
        "method is `get_<name>` (or HTA's method name where HTA has the analysis, which the name "
        "then follows). Earlier names still work (table at the end). The same signatures, with "
        "types, ship in `analysis/api.pyi` for editors and type checkers.",
        "",
        "## The analyses",
        "",
        "| Method | Name | Where | Returns |",
        "|---|---|---|---|",
        *(f"| [`{s.method}`](#{s.method}) | `{s.name}` | {_where(s)} | `{_md_escape(s.returns)}` |"
          for s in specs),
        "",
    ]
    for spec in specs:
        lines += _md_analysis(spec, ns)
    lines += ["## Loading and the other methods", ""]
    for name, member in _hand_written():
        func = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
        sig = _signature(inspect.signature(func), f"TraceAnalysis.{name}", ns, stub=False)
        sig = sig.replace("(self, ", "(", 1).replace("(self)", "()").replace("(cls, ", "(", 1)
        if isinstance(member, property):
            call = f"ta.{name}{sig.partition(')')[2].replace(' -> ', ': ')}"
        elif name == "__init__":
            call = f"TraceAnalysis{sig}"
        else:
            owner = "TraceAnalysis" if isinstance(member, classmethod) else "ta"
            call = f"{owner}.{name}{sig}"
        doc = member.__doc__ or (TraceAnalysis.__doc__ if name == "__init__" else "")
        lines += [f"### `{'TraceAnalysis' if name == '__init__' else name}`", "", "```python",
                  call, "```", ""]
        lines += [inspect.cleandoc(doc), ""] if doc else []
    lines += ["## Earlier names", "",
              "Accepted wherever a name is (`ta.run`, `ta.run_many`, "
              "`trace-analysis report --analyses`); earlier method names stay on `TraceAnalysis`.",
              "", "| Earlier name | Now |", "|---|---|"]
    for spec in specs:
        lines += [f"| `{a}` | `{spec.name}` |" for a in spec.aliases]
        lines += [f"| `ta.{a}()` | `ta.{spec.method}()` |" for a in spec.method_aliases]
    return "\n".join(lines).rstrip() + "\n"
