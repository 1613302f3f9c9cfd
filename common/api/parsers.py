"""JSON bodies with a bounded depth. No request of the API needs more than a few levels, and
a body nested hundreds deep made every recursive walk over it (DRF's, ours, the JSON decoder
itself) overflow Python's stack: a 500. Deeper bodies are a 400 before anything reads them."""

from rest_framework import parsers
from rest_framework.exceptions import ParseError

MAX_JSON_DEPTH = 32
TOO_DEEP = f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels."


def deeper_than(value, limit: int) -> bool:
    """Whether objects and arrays nest more than ``limit`` levels (the body itself is one);
    walked with a list, not recursion, whatever the depth."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
    return False


class BoundedJSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(TOO_DEEP) from None
        if deeper_than(data, MAX_JSON_DEPTH):
            raise ParseError(TOO_DEEP)
        return data
