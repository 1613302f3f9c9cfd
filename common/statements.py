"""Rows read and written by statements written once from a model's metadata, for the few
statements that every API request makes: the ORM composes a statement anew for every query,
and for a lookup by a unique column or a plain insert that costs several times the CPU of
running it (0.3-0.6 ms against 0.05-0.1 ms). What these read is what the ORM's ``get`` reads
(every concrete field, each through the database's converters, the instance built by
``Model.from_db``); what they write is what ``save()`` writes for a new instance."""

import functools

from django.db import connection
from django.db.models import signals


def columns(meta) -> list[tuple]:
    """(field, the database's converters) for each concrete field of a model's ``_meta``: SQLite
    keeps dates as text and booleans as integers, and the ORM converts them on reading."""
    return [(field, connection.ops.get_db_converters(field.cached_col)
             + field.get_db_converters(connection)) for field in meta.concrete_fields]


def from_row(model, read: list[tuple], values):
    """The instance of ``model`` that the ORM would build from ``values``, read as ``read``
    (``columns``) says."""
    converted = []
    for value, (field, converters) in zip(values, read, strict=True):
        for converter in converters:
            value = converter(value, field.cached_col, connection)
        converted.append(value)
    return model.from_db(connection.alias, [field.attname for field, _ in read], converted)


def by_unique(model, field_name: str, value):
    """``model.objects.get(**{field_name: value})`` for a unique field, or None when no row has
    it. ``value`` is prepared as the ORM's exact lookup prepares it (a CharField compares
    ``str(value)``); like the ORM, this raises TypeError or ValueError for a value the field
    cannot take."""
    sql, read, field = _by_unique_sql(model, field_name)
    prepared = field.get_db_prep_value(field.get_prep_value(value), connection, prepared=True)
    with connection.cursor() as cursor:
        cursor.execute(sql, [prepared])
        row = cursor.fetchone()
    return None if row is None else from_row(model, read, row)


@functools.cache
def _by_unique_sql(model, field_name: str):
    meta = model._meta
    field = meta.get_field(field_name)
    if not (field.unique or field.primary_key):
        raise ValueError(f"{meta.label}.{field_name} is not unique: a lookup may find many rows")
    read = columns(meta)
    quote = connection.ops.quote_name
    sql = (
        f"SELECT {', '.join(quote(f.column) for f, _ in read)} FROM {quote(meta.db_table)} "
        f"WHERE {quote(field.column)} = %s"
    )
    return sql, read, field


def insert(instance, unless_taken: tuple[str, ...] = ()) -> bool:
    """Save a new ``instance`` as ``save()`` does (each field's ``pre_save``, so defaults and
    ``auto_now_add`` apply; ``pre_save`` and ``post_save`` sent; the primary key set) and return
    True. ``unless_taken``: the fields of a unique constraint; when a row already holds the
    same values, nothing is written and False is returned, where ``save()`` would raise an
    IntegrityError that only a savepoint could recover from. Like ``save()``, it waits for a
    concurrent transaction that inserted the same values to commit or roll back."""
    model = type(instance)
    sql, fields, pk = _insert_sql(model, unless_taken)
    signals.pre_save.send(sender=model, instance=instance, raw=False, using=connection.alias,
                          update_fields=None)
    values = [field.get_db_prep_save(field.pre_save(instance, True), connection)
              for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        row = cursor.fetchone()
    if row is None:
        return False
    setattr(instance, pk.attname, row[0])
    instance._state.adding, instance._state.db = False, connection.alias
    signals.post_save.send(sender=model, instance=instance, created=True, update_fields=None,
                           raw=False, using=connection.alias)
    return True


@functools.cache
def _insert_sql(model, unless_taken: tuple[str, ...]):
    meta = model._meta
    fields = [field for field in meta.concrete_fields if not field.primary_key]
    quote = connection.ops.quote_name
    conflict = ""
    if unless_taken:
        columns_taken = ", ".join(quote(meta.get_field(name).column) for name in unless_taken)
        conflict = f"ON CONFLICT ({columns_taken}) DO NOTHING "
    sql = (
        f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))}) {conflict}"
        f"RETURNING {quote(meta.pk.column)}"
    )
    return sql, fields, meta.pk
