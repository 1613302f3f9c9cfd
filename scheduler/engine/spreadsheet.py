"""CSV cells a spreadsheet will not run as formulas (OWASP's rule for CSV injection).

A text cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is what
Excel, LibreOffice and Google Sheets read as a formula, so a workload named
``=HYPERLINK(...)`` would run on the reader's machine. Such a cell is written with a leading
single quote, which spreadsheets show as text; numbers are written as they are (a negative
number is data, not a formula). Every CSV the project writes goes through ``csv_writer``; the
trace reader takes the quote off again with ``cell_value``, so traces read back unchanged."""

import csv
from collections.abc import Iterable
from typing import Any

FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
NEUTRALISER = "'"


def safe_cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(FORMULA_TRIGGERS):
        return NEUTRALISER + value
    return value


def cell_value(text: str) -> str:
    """The text a ``safe_cell`` was made from."""
    if text.startswith(NEUTRALISER) and text[1:].startswith(FORMULA_TRIGGERS):
        return text[1:]
    return text


class SafeWriter:
    """``csv.writer`` whose text cells cannot be formulas."""

    def __init__(self, fh, **kwargs):
        self._writer = csv.writer(fh, **kwargs)

    def writerow(self, row: Iterable[Any]):
        return self._writer.writerow([safe_cell(value) for value in row])

    def writerows(self, rows: Iterable[Iterable[Any]]):
        for row in rows:
            self.writerow(row)


def csv_writer(fh, **kwargs) -> SafeWriter:
    return SafeWriter(fh, **kwargs)
