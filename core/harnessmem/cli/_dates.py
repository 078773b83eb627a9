"""Days as a person types them on the command line: ``--since "last week"``."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import click

#: The forms :func:`parse_day` reads, for help texts and errors.
FORMS = "YYYY-MM-DD, today, yesterday, 'N days ago', 'N weeks ago', 'last week', 'last month'"

_AGO = re.compile(r"(\d{1,4})\s+(day|week|month)s?\s+ago")
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30}


def today_in(timezone: str) -> date:
    """Today in the workspace's time zone."""
    return datetime.now(ZoneInfo(timezone)).date()


def parse_day(text: str, today: date) -> date:
    """The day ``text`` names, counted back from ``today``; BadParameter for other text.

    ``last week`` and ``last month`` mean 7 and 30 days back (a search "since last week"
    then covers the past seven days and today).
    """
    value = " ".join(text.strip().lower().split())
    try:
        return date.fromisoformat(value)
    except ValueError:
        pass
    if value == "today":
        return today
    if value == "yesterday":
        return today - timedelta(days=1)
    if value in ("last week", "a week ago"):
        return today - timedelta(days=7)
    if value in ("last month", "a month ago"):
        return today - timedelta(days=30)
    match = _AGO.fullmatch(value)
    if match:
        return today - timedelta(days=int(match[1]) * _UNIT_DAYS[match[2]])
    raise click.BadParameter(f"{text!r} is not a day I can read; use {FORMS}")
