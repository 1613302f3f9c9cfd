"""The errors a service raises when it refuses a request. Pages show ``message`` next to
``field``; the API answers them as JSON (``common.api.exceptions``)."""


class ServiceError(ValueError):
    """A request that cannot be carried out (bad input, an action the object's state does not
    allow); ``message`` is shown to the user as it is, next to ``field`` when it is about one
    form field."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field

    def show_on(self, form) -> None:
        """Put the message on ``form``: next to its field when the form has it, else above."""
        form.add_error(self.field if self.field in form.fields else None, self.message)


class ConflictError(ServiceError):
    """Someone changed the object since the user read it: read it again and retry."""
