from rest_framework.pagination import PageNumberPagination


class Pagination(PageNumberPagination):
    """``?page=2&page_size=100``; pages of 50 by default, at most 500."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500
