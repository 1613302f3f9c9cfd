"""Database expressions shared by the report queries, on PostgreSQL and SQLite alike."""

from datetime import UTC, datetime

from django.conf import settings
from django.db import connections
from django.db.models import FloatField, Func, IntegerField, Value
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


def numeric_rows(queryset) -> list[tuple]:
    """The rows of a ``values_list`` queryset whose columns are all numbers (ids, counts,
    `Epoch` floats) as the driver gives them: Django's per-value converters would only turn
    floats into floats, some 30 ms on the tens of thousands of queue stays of a year."""
    sql, params = queryset.query.sql_with_params()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


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


def sums_by_period(queryset, field: str, periods: list[tuple[datetime, datetime]],
                   group: str, **sums):
    """Rows of (``group``, period index, *``sums``) of ``queryset``: the sums of each group
    over the rows whose ``field`` falls in each period of ``periods`` (half-open, none
    overlapping), in one query: one aggregate per period over its own index range, joined by
    UNION ALL. Not one aggregate grouped by a CASE naming the period: SQLite evaluates the
    CASE on every row and sorts all the rows of the span to group them, some 3x slower on
    the hundreds of thousands of hourly rollups of eight months or quarters."""
    def of(index, start, end):
        return (queryset.filter(**{f"{field}__gte": start, f"{field}__lt": end})
                .values(group).annotate(period=Value(index, output_field=IntegerField()),
                                        **sums)
                .values_list(group, "period", *sums).order_by())

    parts = [of(index, start, end) for index, (start, end) in enumerate(periods)]
    return parts[0].union(*parts[1:], all=True) if len(parts) > 1 else parts[0]
