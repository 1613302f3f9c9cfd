"""The project's side of the API: the URL root (/api/), token authentication and the token
page. What the apps' endpoints share (errors as JSON, NUL rejection, pagination, permission
classes) lives below every app, in ``common.api``; the endpoints in each app's ``api``."""
