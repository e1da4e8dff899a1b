"""The time a question names ("last month", "in May", "two weeks ago"), as a window relative to
the moment it is asked. Pure: the moment comes in as an argument.

Days are counted as proleptic Gregorian day numbers (1 is 0001-01-01), plain integers with no
bounds, so "3000 years ago" or "in December 9999" is arithmetic, not a ``datetime`` out of
range; the window is then clamped to the moments a date can be rendered for (years 1 to
9999, well inside the store's 64-bit milliseconds), and a window wholly outside them names
no time."""

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

_DAY_MS = 86_400_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_FIRST_MS = to_ms(datetime(1, 1, 1, tzinfo=UTC))  # the first moment a date can be rendered for
_LAST_MS = to_ms(datetime(9999, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC))  # and the last
_MAX_DIGITS = 9  # a count of 10**9 days or more is out of range whatever the unit
_DAYS_BEFORE_MONTH = (0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)


def _leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _first_of(year: int, month: int) -> int:
    """The day number of the first of ``month`` (months past 12 or below 1 roll the year),
    for any year: the formula ``date.toordinal`` uses, without its bounds."""
    year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
    before = year - 1
    days = before * 365 + before // 4 - before // 100 + before // 400
    return days + _DAYS_BEFORE_MONTH[month - 1] + (month > 2 and _leap(year)) + 1


def _span(first_day: int, end_day: int) -> Window | None:
    """Days [first_day, end_day) as inclusive milliseconds, clamped to the renderable years;
    None when nothing of it is inside them."""
    start = max(_FIRST_MS + (first_day - 1) * _DAY_MS, _FIRST_MS)
    end = min(_FIRST_MS + (end_day - 1) * _DAY_MS - 1, _LAST_MS)
    return (start, end) if start <= end else None


def _year(year: int) -> Window | None:
    return _span(_first_of(year, 1), _first_of(year + 1, 1))


def _month(year: int, month: int) -> Window | None:
    return _span(_first_of(year, month), _first_of(year, month + 1))


def _ago(count: int, unit: str, now: datetime) -> Window | None:
    today = now.toordinal()
    if unit == "day":
        return _span(today - count, today - count + 1)
    if unit == "week":
        centre = today - 7 * count
        return _span(centre - 3, centre + 4)
    if unit == "month":
        return _month(now.year, now.month - count)
    return _year(now.year - count)


def _relative(words: list[str], now: datetime) -> Window | None:
    today = now.toordinal()
    if words == ["yesterday"]:
        return _span(today - 1, today)
    if words == ["today"]:
        return _span(today, today + 1)
    which, unit = words[0], words[-1]
    if which == "past":  # the last 7, 30 or 365 days up to today
        days = {"week": 7, "month": 30, "year": 365}[unit]
        return _span(today - days, today + 1)
    back = 0 if which == "this" else 1
    if unit == "week":
        monday = today - now.weekday() - 7 * back
        return _span(monday, monday + 7)
    if unit == "month":
        return _month(now.year, now.month - back)
    return _year(now.year - back)


def _moment(as_of_ms: int) -> datetime:
    """``as_of_ms`` as a UTC datetime, held within the renderable years."""
    return _EPOCH + timedelta(milliseconds=min(max(as_of_ms, _FIRST_MS), _LAST_MS))


def window_in(question: str, as_of_ms: int) -> Window | None:
    """The window the question's own words name, relative to ``as_of_ms``; None when it names
    no time this understands, or a time wholly outside the years 1 to 9999. Calendar units
    are whole: "last month" is the calendar month before the one ``as_of`` is in; "two weeks
    ago" is the week around that day; "in May" is the latest May not after ``as_of``."""
    text = question.lower()
    now = _moment(as_of_ms)
    if found := _AGO.search(text):
        amount = found.group(1)
        if not amount.isdigit():
            count = _NUMBERS[amount.removesuffix(" of").split()[-1]]
        elif len(amount) <= _MAX_DIGITS:  # (and int() refuses a few thousand digits)
            count = int(amount)
        else:
            return None
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
