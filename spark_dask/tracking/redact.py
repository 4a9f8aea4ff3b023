"""What the cluster writes into an MLflow run is scrubbed first: a line that names a
secret keeps the name and loses the rest (Spark's own rule, ``spark.redaction.regex``),
and a URL loses its user and password.

Spark's default pattern is :data:`SPARK_REDACTION` (``spark.redaction.regex`` in
``org.apache.spark.internal.config``: 4.x adds ``credential`` to 3.5's
``(?i)secret|password|token|access[.]?key``); an application that sets its own pattern
gets both. Standard library only.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

SPARK_REDACTION = r"(?i)secret|password|token|access[.]?key|credential"
REDACTED = "*********(redacted)"  # Spark's own replacement text
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")


def _compiled(pattern: str) -> re.Pattern | None:
    """``pattern`` (a Java regular expression such as Spark's) as Python's, its leading
    ``(?i)`` a flag; None where Python cannot read it."""
    flags = 0
    if pattern.startswith("(?i)"):
        pattern, flags = pattern[4:], re.IGNORECASE
    try:
        return re.compile(pattern, flags)
    except re.error:
        return None


class Redactor:
    """Scrubs text before it goes into a run.

    Parameters
    ----------
    pattern : str, optional
        The application's ``spark.redaction.regex``; Spark's default is always applied too.

    Examples
    --------
    >>> Redactor().text("ok line\\nAWS_SECRET_ACCESS_KEY=abc123 more\\nurl http://u:pw@host:5000/x")
    'ok line\\nAWS_SECRET_ACCESS_KEY=*********(redacted)\\nurl http://host:5000/x'
    """

    def __init__(self, pattern: str | None = None):
        self.patterns = [p for p in (_compiled(SPARK_REDACTION), _compiled(pattern or "")) if p is not None]
        self.patterns = [p for p in self.patterns if p.pattern]

    def line(self, line: str) -> str:
        """``line`` without user information in URLs, and cut after the first word that
        names a secret (the word kept, then ``=`` or ``:`` where the line had one)."""
        line = _USERINFO.sub(r"\g<scheme>", line)
        cut = None
        for p in self.patterns:
            m = p.search(line)
            if m is not None and (cut is None or m.start() < cut.start()):
                cut = m
        if cut is None:
            return line
        word = re.match(r"[^\s=:]*", line[cut.end() :]).group()
        head = line[: cut.end() + len(word)]
        sep = re.match(r"\s*[=:]?", line[len(head) :]).group().strip()
        return f"{head}{sep or ' '}{REDACTED}"

    def pairs(self, text: str) -> str:
        """``text`` with the value of each ``name=value`` or ``name: value`` whose name
        names a secret replaced, the rest kept: for a text whose lines cannot be cut
        (an HTML report holds its data on one line).

        >>> Redactor().pairs('{"a": 1} MY_TOKEN=abc; x: <b>password: hunter2</b>')
        '{"a": 1} MY_TOKEN=*********(redacted); x: <b>password: *********(redacted)</b>'
        """
        text = _USERINFO.sub(r"\g<scheme>", text)
        for p in self.patterns:
            pair = re.compile(rf"([\w.-]*(?:{p.pattern})[\w.-]*\s*[=:]\s*)[^\s\"'<>,;&]+", p.flags)
            text = pair.sub(rf"\g<1>{REDACTED}", text)
        return text

    def text(self, text: str) -> str:
        """Every line of ``text`` scrubbed (:meth:`line`)."""
        return "\n".join(self.line(x) for x in text.split("\n"))


def public_uri(uri: str) -> str:
    """A tracking URI as it may be shown: without user and password.

    >>> public_uri("https://user:token@example.com/mlflow"), public_uri("databricks")
    ('https://example.com/mlflow', 'databricks')
    """
    parts = urlsplit(uri)
    if parts.username is None and parts.password is None:
        return uri
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


__all__ = ["REDACTED", "SPARK_REDACTION", "Redactor", "public_uri"]
