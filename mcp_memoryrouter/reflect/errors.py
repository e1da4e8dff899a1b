"""Failures of the consolidation loop, under the package's one error tree (``errors.py``).

    MemoryRouterError
    ├── ModelFailure    502  model_failure    the model adapter produced no answer at all
    └── InvalidAnswer   422  invalid_answer   the model's answer breaks the reflection contract

A bad import file is an ``InvalidRequest`` whose ``details`` name the line.
"""

from __future__ import annotations

from mcp_memoryrouter.errors import MemoryRouterError


class ModelFailure(MemoryRouterError):
    """Raised when the model command or endpoint fails, times out or answers no text."""

    status = 502
    code = "model_failure"


class InvalidAnswer(MemoryRouterError):
    """Raised when the model's answer holds no entries the contract accepts."""

    status = 422
    code = "invalid_answer"
