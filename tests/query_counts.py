"""How many queries a page costs: the one helper the query-count tests share."""

from django.db import connection
from django.test.utils import CaptureQueriesContext


def get_counting(client, url, **extra):
    """``client.get(url)`` (which must answer 200) and the number of queries it made."""
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, **extra)
    assert response.status_code == 200
    return response, len(queries)


def count_queries(client, url, **extra) -> int:
    return get_counting(client, url, **extra)[1]
