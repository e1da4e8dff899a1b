"""The event date as words, so "what happened in May 2023" can match lexically and the
embedding of a memory carries when it happened."""

from __future__ import annotations

from datetime import UTC, datetime

_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def date_words(date_from: int, date_to: int) -> str:
    """``Monday 8 May 2023`` for a moment; ``May 2023 to June 2023`` for a longer window."""
    start = datetime.fromtimestamp(date_from / 1000, tz=UTC)
    if date_to - date_from < 86_400_000:
        return f"{_DAYS[start.weekday()]} {start.day} {_MONTHS[start.month - 1]} {start.year}"
    end = datetime.fromtimestamp(date_to / 1000, tz=UTC)
    first = f"{_MONTHS[start.month - 1]} {start.year}"
    last = f"{_MONTHS[end.month - 1]} {end.year}"
    return first if first == last else f"{first} to {last}"
