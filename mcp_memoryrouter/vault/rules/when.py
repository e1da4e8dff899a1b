"""The time a question names ("last month", "in May", "two weeks ago"), as a window relative to
the moment it is asked. Pure: the moment comes in as an argument."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from mcp_memoryrouter.vault.rules.dates import to_ms

_MONTHS = {
    name: n
    for n, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple": 2,
    "few": 3,
}  # fmt: skip
_AGO = re.compile(
    r"\b(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
    r"(?:a )?couple(?: of)?|(?:a )?few)\s+(day|week|month|year)s?\s+ago\b"
)
_RELATIVE = re.compile(r"\b(yesterday|today|(?:last|this|past)\s+(?:week|month|year))\b")
_IN_MONTH = re.compile(
    r"\b(?:in|during|since|back in|on)\s+("
    + "|".join(sorted(_MONTHS, key=len, reverse=True))
    + r")\b(?:\s+\d{1,2}(?:st|nd|rd|th)?\b)?(?:,?\s+(\d{4})\b)?"
)
_IN_YEAR = re.compile(r"\b(?:in|during|back in)\s+((?:19|20)\d{2})\b")

Window = tuple[int, int]  # [from, to] in epoch milliseconds, both inclusive


def _day(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _month_start(year: int, month: int) -> datetime:
    year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
    return datetime(year, month, 1, tzinfo=UTC)


def _span(start: datetime, end: datetime) -> Window:
    """[start, end) as inclusive milliseconds."""
    return to_ms(start), to_ms(end) - 1


def _year(year: int) -> Window:
    return _span(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC))


def _month(year: int, month: int) -> Window:
    start = _month_start(year, month)
    return _span(start, _month_start(start.year, start.month + 1))


def _ago(count: int, unit: str, now: datetime) -> Window:
    today = _day(now)
    if unit == "day":
        day = today - timedelta(days=count)
        return _span(day, day + timedelta(days=1))
    if unit == "week":
        centre = today - timedelta(weeks=count)
        return _span(centre - timedelta(days=3), centre + timedelta(days=4))
    if unit == "month":
        return _month(now.year, now.month - count)
    return _year(now.year - count)


def _relative(words: list[str], now: datetime) -> Window:
    today = _day(now)
    if words == ["yesterday"]:
        return _span(today - timedelta(days=1), today)
    if words == ["today"]:
        return _span(today, today + timedelta(days=1))
    which, unit = words[0], words[-1]
    if which == "past":  # the last 7, 30 or 365 days up to today
        days = {"week": 7, "month": 30, "year": 365}[unit]
        return _span(today - timedelta(days=days), today + timedelta(days=1))
    back = 0 if which == "this" else 1
    if unit == "week":
        monday = today - timedelta(days=today.weekday() + 7 * back)
        return _span(monday, monday + timedelta(days=7))
    if unit == "month":
        return _month(now.year, now.month - back)
    return _year(now.year - back)


def window_in(question: str, as_of_ms: int) -> Window | None:
    """The window the question's own words name, relative to ``as_of_ms``; None when it names
    no time this understands. Calendar units are whole: "last month" is the calendar month
    before the one ``as_of`` is in; "two weeks ago" is the week around that day; "in May" is
    the latest May not after ``as_of``."""
    text = question.lower()
    now = datetime.fromtimestamp(as_of_ms / 1000, tz=UTC)
    if found := _AGO.search(text):
        amount = found.group(1)
        count = (
            int(amount) if amount.isdigit() else _NUMBERS[amount.removesuffix(" of").split()[-1]]
        )
        return _ago(count, found.group(2), now)
    if found := _RELATIVE.search(text):
        return _relative(found.group(1).split(), now)
    if found := _IN_MONTH.search(text):
        month = _MONTHS[found.group(1)]
        year = int(found.group(2)) if found.group(2) else now.year - (month > now.month)
        return _month(year, month)
    if found := _IN_YEAR.search(text):
        return _year(int(found.group(1)))
    return None
