"""OpenAPI additions: every operation documents its JSON errors, so a client (and the
schemathesis run in the test suite) knows every status code it may get."""

ERROR = {
    "type": "object",
    "description": "An error: `detail` is the message to show; `field` the input it is about.",
    "properties": {
        "detail": {"type": "string"},
        "field": {"type": "string", "nullable": True},
        "errors": {"type": "object", "additionalProperties": True},
    },
    "required": ["detail"],
}
MESSAGES = {
    "400": "Bad input, or an action the object's state does not allow",
    "401": "Not authenticated: send `Authorization: Bearer <token>`",
    "403": "Not allowed (the portal's permission rules)",
    "404": "No such object, or one you may not see",
    "405": "Method not allowed",
    "409": "Changed by someone else since you read it",
    "415": "Unsupported media type",
    "406": "Not acceptable",
    "429": "Too many invalid tokens from your address: wait before trying again",
}
IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "Any unique string (a UUID): a retry with the same key and body gets the "
    "first answer again and changes nothing more; the same key with another body is a 409.",
    "schema": {"type": "string", "minLength": 1, "maxLength": 255},
}


def add_error_responses(result, generator, request, public):
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR
    reference = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for path in result.get("paths", {}).values():
        for method, operation in path.items():
            codes = ["401", "403", "404", "405", "406", "429"]
            if method in ("post", "put", "patch", "delete"):
                codes += ["400", "409", "415"]
            if method == "post":
                operation.setdefault("parameters", []).append(IDEMPOTENCY_KEY)
            elif operation.get("parameters"):
                codes += ["400"]
            responses = operation.setdefault("responses", {})
            for code in codes:
                responses.setdefault(code, {"description": MESSAGES[code], "content": reference})
    return result
