"""Database expressions shared by the report queries, on PostgreSQL and SQLite alike."""

from datetime import UTC, datetime

from django.db.models import FloatField, Func


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
