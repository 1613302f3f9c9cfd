from django.http import HttpResponseBadRequest, JsonResponse

NUL = "\x00"
MESSAGE = "NUL characters are not allowed."


class RejectNulCharactersMiddleware:
    """A NUL character in the path, the query or a form is refused with a 400 before any view
    runs: PostgreSQL can neither compare nor store one, so a lookup with it would be a 500.
    JSON bodies are checked by the API's RejectNulMixin once parsed."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        where = _where_nul(request)
        if where is None:
            return self.get_response(request)
        if request.path.startswith("/api/"):
            return JsonResponse({"detail": f"{where}: {MESSAGE}", "field": where}, status=400)
        return HttpResponseBadRequest(f"{MESSAGE} ({where})", content_type="text/plain")


def _where_nul(request) -> str | None:
    if NUL in request.path:
        return "path"
    if _in_querydict(request.GET):
        return "query"
    if request.method == "POST" and _in_querydict(request.POST):
        return "body"
    return None


def _in_querydict(data) -> bool:
    return any(NUL in key or any(NUL in value for value in values) for key, values in data.lists())
