"""Database expressions shared by the report queries, on PostgreSQL and SQLite alike."""

from datetime import UTC, datetime

from django.conf import settings
from django.db.models import Case, FloatField, Func, IntegerField, Value, When
from django.db.models.functions import Cast, Floor, Trunc


class Epoch(Func):
    """A datetime column as seconds since 1970 (a float), computed by the database.

    The reports read tens of thousands of timestamps; a float crosses the driver about ten
    times faster than a datetime is parsed. PostgreSQL keeps microseconds; SQLite's
    ``julianday`` milliseconds (rounded, so whole seconds stay exact)."""

    output_field = FloatField()
    arity = 1

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection,
                           template="EXTRACT(EPOCH FROM %(expressions)s)::double precision",
                           **extra)

    def as_sqlite(self, compiler, connection, **extra):
        return self.as_sql(
            compiler, connection,
            template="(ROUND((julianday(%(expressions)s) - 2440587.5) * 86400000.0) / 1000.0)",
            **extra,
        )


def moment(epoch: float | None) -> datetime | None:
    """An aware UTC datetime from an `Epoch` value."""
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC)


STEPS = {"hour": 3600, "day": 86400}


def time_bucket(field: str, kind: str):
    """The start of the hour or day ``field`` falls in, for GROUP BY. With the site in UTC
    (the default) it is arithmetic on `Epoch` (bucket number = seconds // step): SQLite
    computes Django's ``Trunc`` with a Python function per row, some 100x slower on the
    hundreds of thousands of rollups of a year. Elsewhere ``Trunc`` (time zones, DST).
    `bucket_start` turns the value back into a datetime."""
    if settings.TIME_ZONE == "UTC":
        return Cast(Floor(Epoch(field) / STEPS[kind]), IntegerField())
    return Trunc(field, kind)


def bucket_start(value, kind: str) -> datetime:
    return value if isinstance(value, datetime) else moment(value * STEPS[kind])


def period_index(field: str, periods: list[tuple[datetime, datetime]]):
    """The index of the period of ``periods`` (half-open, none overlapping) that ``field``
    falls in, for GROUP BY; NULL in none. A query of one period filters on it already: 0."""
    if len(periods) == 1:
        return Value(0, output_field=IntegerField())
    return Case(
        *(When(**{f"{field}__gte": a, f"{field}__lt": b}, then=Value(index))
          for index, (a, b) in enumerate(periods)),
        output_field=IntegerField(),
    )
