"""Event times: parsed from ISO dates and datetimes, stored as UTC epoch milliseconds,
rendered ``YYYY-MM-DDTHH:MM:SS.sssZ``."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta

from mcp_memoryrouter.errors import InvalidRequest

_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DAY_MS = 86_400_000


def to_ms(moment: datetime) -> int:
    """UTC epoch milliseconds, truncating sub-millisecond precision."""
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def format_ms(ms: int) -> str:
    """Render epoch milliseconds as ``2026-02-01T04:11:09.000Z``."""
    moment = _EPOCH + timedelta(milliseconds=ms)
    # the year by hand: strftime("%Y") does not pad years before 1000 on every platform
    stamp = f"{moment.year:04d}-" + moment.strftime("%m-%dT%H:%M:%S.")
    return stamp + f"{moment.microsecond // 1000:03d}Z"


def parse_moment(text: str, *, field: str, end_of_day: bool = False) -> int:
    """Parse an ISO date or datetime into epoch ms.

    A date alone means the start of that UTC day, or its last millisecond when
    ``end_of_day`` is set (a date-only ``to`` bound). A datetime without an offset is UTC.
    """
    value = text.strip()
    try:
        if _DATE_ONLY.match(value):
            day = date.fromisoformat(value)
            start = to_ms(datetime.combine(day, time(0), tzinfo=UTC))
            return start + _DAY_MS - 1 if end_of_day else start
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise InvalidRequest(
            f"{field} must be an ISO date (2026-02-01) or datetime (2026-02-01T04:11:09Z)",
            {"field": field},
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        # an offset can carry a moment past year 9999 or before year 1 in UTC, where
        # no date can be rendered
        moment = moment.astimezone(UTC)
    except OverflowError as exc:
        raise InvalidRequest(
            f"{field} is outside the years 0001 to 9999 in UTC", {"field": field}
        ) from exc
    return to_ms(moment)
