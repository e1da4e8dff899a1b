"""Obvious secrets that ``store_memory`` refuses to put into long-term memory."""

from __future__ import annotations

import re

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("a memory key", re.compile(r"\bmk[_-][0-9A-Za-z]{20,}")),
    ("an API key", re.compile(r"\b(?:sk|rk)-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}")),
    ("an AWS access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    (
        "a GitHub token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
    ),
    ("a Slack token", re.compile(r"\bxox[abpors]-[A-Za-z0-9-]{10,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    (
        "a JSON web token",
        re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
    ),
    ("a bearer token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{20,}")),
    (
        "a password",
        re.compile(
            r"(?i)\b(?:password|passwd|passphrase|pwd|secret|api[_ ]?key|access[_ ]?token)"
            r"\s*(?:is|was|=|:)\s*['\"]?\S{4,}"
        ),
    ),
)


def find_secret(text: str) -> str | None:
    """Name the first kind of secret found in ``text``, or None."""
    for kind, pattern in _PATTERNS:
        if pattern.search(text):
            return kind
    return None
