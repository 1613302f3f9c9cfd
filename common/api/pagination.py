from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination


class Pagination(PageNumberPagination):
    """``?page=2&page_size=100``; pages of 50 by default, at most 500. A page or a page size
    that is not a whole number in range is a 400 (not silently the default); a page past the
    end 404."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_number(self, request, paginator):
        """The page asked for: a whole number from 1 (an empty ``page=`` is a mistake, not
        page 1); a page past the end is still the 404 DRF answers."""
        raw = request.query_params.get(self.page_query_param)
        if raw is None:
            return 1
        if not raw.isdigit() or int(raw) < 1:
            raise ValidationError({self.page_query_param: ["A whole number from 1."]})
        return int(raw)

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        try:
            size = int(raw)
        except ValueError:
            size = 0
        if not 1 <= size <= self.max_page_size:
            raise ValidationError({self.page_size_query_param: [
                f"A whole number from 1 to {self.max_page_size}."
            ]})
        return size

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"].update(minimum=1, maximum=self.max_page_size)
            if parameter["name"] == self.page_query_param:
                parameter["schema"]["minimum"] = 1
        return parameters
