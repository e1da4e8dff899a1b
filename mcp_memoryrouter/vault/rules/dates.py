"""Event times: parsed from ISO dates and datetimes, stored as UTC epoch milliseconds,
rendered ``YYYY-MM-DDTHH:MM:SS.sssZ``."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta

from mcp_memoryrouter.errors import InvalidRequest
from mcp_memoryrouter.limits import MOMENT, MOMENT_OFF_THE_EDGE

_DATE_ONLY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DAY_MS = 86_400_000


def to_ms(moment: datetime) -> int:
    """UTC epoch milliseconds, truncating sub-millisecond precision."""
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


EARLIEST_MS = to_ms(datetime.min.replace(tzinfo=UTC))  # 0001-01-01T00:00:00.000Z


def format_ms(ms: int) -> str:
    """Render epoch milliseconds as ``2026-02-01T04:11:09.000Z``."""
    moment = _EPOCH + timedelta(milliseconds=ms)
    # the year by hand: strftime("%Y") does not pad years before 1000 on every platform
    stamp = f"{moment.year:04d}-" + moment.strftime("%m-%dT%H:%M:%S.")
    return stamp + f"{moment.microsecond // 1000:03d}Z"


def day(ms: int) -> str:
    """The UTC day of epoch milliseconds, ``2026-02-01``."""
    return format_ms(ms)[:10]


def parse_moment(text: str, *, field: str, end_of_day: bool = False) -> int:
    """Parse an ISO date or datetime into epoch ms.

    ``text`` must be a ``limits.MOMENT`` as a whole, the pattern ``/openapi.json`` carries
    (valid dates only), and on the first or last day of the years 0001-9999 in UTC, so no
    offset carries it outside them. A date alone means the start of that UTC day, or its
    last millisecond when ``end_of_day`` is set (a date-only ``to`` bound). A datetime
    without an offset is UTC.
    """
    if not MOMENT.fullmatch(text):
        raise InvalidRequest(
            f"{field} must be an ISO date (2026-02-01) or datetime (2026-02-01T04:11:09Z)",
            {"field": field},
        )
    if MOMENT_OFF_THE_EDGE.fullmatch(text):
        raise InvalidRequest(
            f"{field} on 0001-01-01 or 9999-12-31 must be in UTC (Z): an offset could carry "
            "it outside the years 0001 to 9999",
            {"field": field},
        )
    if _DATE_ONLY.fullmatch(text):
        start = to_ms(datetime.combine(date.fromisoformat(text), time(0), tzinfo=UTC))
        return start + _DAY_MS - 1 if end_of_day else start
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return to_ms(moment.astimezone(UTC))
