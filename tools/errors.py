"""Every error message the package raises, read from its sources (``ast``).

    python tools/errors.py            # list them: key, exception, where

Used by ``tests/spark/test_docs.py``: each message's *key* (its first literal phrase of at
least 10 characters, without a leading ``spark-dask:``, cut to 50 characters at a word
boundary) must appear on ``docs/troubleshooting.md``, so a new error cannot be added
without its cause and fix there.

What counts as a message:

- the first argument of an exception raised or built (``raise PlanError(...)``,
  ``return PlanError(...)``, ``raise bad("...")``), as far as it is literal text;
- the text returned by the functions whose results are raised
  (``*_problem``, ``*_message``, ``gang_shortfall``);
- module-level message constants used in a raise (``PYSPARK_MISSING``);
- the text of what ``spark-dask doctor`` reports (``Finding(...)``: a problem or a
  warning, with its fix).

Every module under ``spark_dask/`` is read, subpackages included, so a new module needs
no registration. A raise whose message is a variable or a call (``raise PlanError(msg)``)
has no text to read: ``tests/spark/test_docs.py`` lists the known ones (``UNREAD_OK``) and
fails on any other, so a message cannot slip past the check that way either.
"""

from __future__ import annotations

import ast
import glob
import os
import re
import sys
from dataclasses import dataclass

MIN_KEY = 10
MAX_KEY = 50
PROBLEM_FUNCTIONS = re.compile(r"(_problem|_message|^gang_shortfall)$")
# Classes whose first argument is a message a user reads, though nothing raises them.
MESSAGE_CLASSES = frozenset({"Finding"})
BREAK = None  # a formatted value between literal fragments


@dataclass(frozen=True)
class Message:
    key: str
    exception: str
    module: str
    line: int
    text: str  # the literal fragments, "…" where values are filled in


def _constants(tree: ast.Module) -> dict[str, str]:
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _literal_text(node.value, {})
            if value is not None:
                out[node.targets[0].id] = value
    return out


def _literal_text(node, constants) -> str | None:
    parts = _fragments(node, constants)
    if parts and all(p is not BREAK for p in parts):
        return "".join(parts)
    return None


def _fragments(node, constants) -> list:
    """Literal text pieces of a string expression, BREAK where a value goes."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        out = []
        for v in node.values:
            out += [v.value] if isinstance(v, ast.Constant) else [BREAK]
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _fragments(node.left, constants) + _fragments(node.right, constants)
    if isinstance(node, ast.Name) and node.id in constants:
        return [constants[node.id]]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in constants
    ):
        out = []
        for piece in re.split(r"(\{[^{}]*\})", constants[node.func.value.id]):
            out.append(BREAK if piece.startswith("{") else piece)
        return out
    if isinstance(node, ast.Tuple):  # version_problem returns (level, message)
        out = []
        for elt in node.elts:
            out += _fragments(elt, constants) + [BREAK]
        return out
    return [BREAK]


def key_of(parts: list) -> str | None:
    """The stable key of a message: its first literal fragment that is a phrase (has a
    space) of at least MIN_KEY characters, without a leading ``spark-dask:`` and the
    punctuation at its ends, cut to MAX_KEY characters at a word boundary."""
    for part in parts:
        if part is BREAK:
            continue
        text = " ".join(part.split())
        text = re.sub(r"^spark-dask:\s*", "", text).strip(" .:;,()[]=-")
        if len(text) < MIN_KEY or " " not in text:
            continue
        if len(text) > MAX_KEY:
            cut = text[:MAX_KEY]
            text = cut[: cut.rfind(" ")] if " " in cut else cut
        return text.strip(" .:;,()[]=-")
    return None


def _name(func) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return f"{_name(func.value)}.{func.attr}"
    return "?"


def _is_exception(name: str) -> bool:
    return name.split(".")[-1].endswith(("Error", "Exception", "Interrupt", "Exit", "BadParameter"))


@dataclass(frozen=True)
class Unread:
    """A raise (or exception built) whose message has no literal phrase to read."""

    module: str
    line: int
    exception: str
    argument: str  # the argument's source text, e.g. ``'spark-dask: ' + problem``


def modules(root: str) -> list[str]:
    """Every module of the package, subpackages included (a new module is found by
    itself: nothing to register), and the GPU check users run from a clone
    (``python -m tools.gpu_check``), whose messages they read too."""
    package = glob.glob(os.path.join(root, "spark_dask", "**", "*.py"), recursive=True)
    check = os.path.join(root, "tools", "gpu_check.py")
    return sorted([*package, *([check] if os.path.exists(check) else [])])


def collect(root: str, unread: list[Unread] | None = None) -> list[Message]:
    """Every message of the package; ``unread`` (if given) receives the raises whose
    message this cannot read (a variable, a call), for tests to account for."""
    out: list[Message] = []
    for path in modules(root):
        module = os.path.relpath(path, root)
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
        constants = _constants(tree)

        def add(expr, exception, line):
            parts = _fragments(expr, constants)  # noqa: B023
            key = key_of(parts)
            if key:
                text = "".join("…" if p is BREAK else p for p in parts)
                out.append(Message(key, exception, module, line, " ".join(text.split())))  # noqa: B023
            elif unread is not None and not exception.endswith("()"):
                unread.append(Unread(module, line, exception, ast.unparse(expr)))  # noqa: B023

        raised_calls = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                raised_calls.add(id(node.exc))
                add(node.exc.args[0], _name(node.exc.func), node.lineno)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and id(node) not in raised_calls and node.args:
                name = _name(node.func)
                if _is_exception(name) or name in MESSAGE_CLASSES:
                    add(node.args[0], name, node.lineno)
            if isinstance(node, ast.FunctionDef) and PROBLEM_FUNCTIONS.search(node.name):
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Return) and sub.value is not None:
                        add(sub.value, f"{node.name}()", sub.lineno)
    return out


def unread_raises(root: str) -> list[Unread]:
    """The raises whose message :func:`collect` cannot read."""
    found: list[Unread] = []
    collect(root, found)
    return found


def normalize(text: str) -> str:
    """How keys and the page are compared: no backticks, one space between words."""
    return " ".join(text.replace("`", "").split())


def missing_from(page: str, root: str) -> list[Message]:
    have = normalize(page)
    return [m for m in collect(root) if normalize(m.key) not in have]


PREFIX = "spark-dask: "


def unprefixed(messages: list[Message], classes) -> list[Message]:
    """The messages raised (or built) with one of ``classes``, the package's own
    exceptions, that do not start with ``spark-dask:``: one form for every refusal, so a
    user sees who speaks (issue 55). Texts returned by ``*_problem`` / ``*_message``
    functions get the prefix where they are raised, doctor findings are rows of a table.

    >>> m = Message("n_workers must be at least 1", "PlanError", "spark_dask/plan.py", 9, "n_workers must be at least 1")
    >>> [x.line for x in unprefixed([m], {"PlanError"})], unprefixed([m], {"HandoffError"})
    ([9], [])
    """
    return [m for m in messages if m.exception.split(".")[-1] in classes and not m.text.startswith(PREFIX)]


# Imperative verbs that cannot follow "use" in advice ("Use close the other cluster").
VERBS = frozenset(
    "add call close give install lower move pass raise remove restart run scale set start stop wait".split()
)
ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.")
PUNCTUATION = "()[]{}'\"`,.;:!?"


def sentence_problems(text: str) -> list[str]:
    """What keeps a message from reading as whole sentences (empty: none), for texts
    with their values filled in or shown as ``…``: no word twice in a row, no doubled
    space, no space before a comma or full stop, brackets that close, a sentence after
    a full stop that starts with a capital letter or a literal (a quote, a digit, a
    name with ``_`` or ``.``), and no verb straight after "use" (advice written as a
    list of things to use and of things to do at once). A message may end without a
    full stop, as Python's own do.

    >>> sentence_problems("spark-dask: nothing was started. Use close the other cluster, or wait.")
    ["'Use close': a verb after 'use'"]
    >>> sentence_problems("spark-dask: it waits (n_workers=1). Close the other cluster, or use scale(n)")
    []
    """
    out = []
    body = text.strip()
    tokens = body.split()
    for a, b in zip(tokens, tokens[1:]):
        word, following = a.strip(PUNCTUATION).lower(), b.strip(PUNCTUATION).lower()
        if word and word == following and word != "…" and a[-1] not in PUNCTUATION and b[0] not in PUNCTUATION:
            out.append(f"doubled word {word!r}")
        if word == "use" and a[-1] not in PUNCTUATION and b.lower() in VERBS:
            out.append(f"{a + ' ' + b!r}: a verb after 'use'")
    for bad in re.findall(r"  | [,;:]| \.(?![A-Za-z_.])", body):
        out.append(f"{bad!r} in the text")
    if body.count("(") != body.count(")"):
        out.append("brackets that do not close")
    for m in re.finditer(r"(\S+)\. +(\S+)", body):
        before, first = m.group(1) + ".", m.group(2)
        if before.lower().lstrip("(").endswith(ABBREVIATIONS) or before.endswith(("….", "...")) or "/" in before:
            continue
        literal = first[0] in "'\"`(…-~$/*[{<" or "_" in first or "." in first.rstrip(".,;:)")
        if not (first[0].isupper() or first[0].isdigit() or literal):
            out.append(f"a sentence starts in lower case: {body[m.start() : m.end() + 20]!r}")
    return out


if __name__ == "__main__":
    ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    unread: list[Unread] = []
    for m in collect(ROOT, unread):
        print(f"{m.module}:{m.line} {m.exception}: [{m.key}]  {m.text[:160]}")
    for u in unread:
        print(f"{u.module}:{u.line} {u.exception}: no literal message: {u.argument}")
    sys.exit(0)
