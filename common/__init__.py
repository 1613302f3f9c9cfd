"""The ground every app stands on and that knows none of them: service errors and the API
plumbing (errors as JSON, NUL rejection, pagination, the schema's error responses,
permission classes built from an app's rules) and idempotent requests, whose kept answers
are its only model."""
