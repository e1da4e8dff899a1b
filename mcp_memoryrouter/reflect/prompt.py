"""The model input: the server's instructions verbatim, then the memories as data.

The loop authors no prompt of its own (the server is the single source of reflection
prompts) and never shows an id: only ``[date] text`` lines follow the instructions. The one
line the loop ever adds is the validation error of a rejected answer, on its single retry.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcp_memoryrouter import schemas


def model_input(
    contract: schemas.ReflectionContract, memories: Sequence[schemas.CheckoutMemory]
) -> str:
    lines = "\n".join(map(_line, memories))
    return f"{contract.instructions}\n\n{lines}\n"


def _line(memory: schemas.CheckoutMemory) -> str:
    """``[date] text``; numbered (``3. [date] text``) when the contract's entries cite lines."""
    number = "" if memory.line is None else f"{memory.line}. "
    return f"{number}[{memory.date}] {memory.text}"


def retry_input(first_input: str, error: str) -> str:
    return f"{first_input}\nThe previous answer was rejected: {error}\n"
