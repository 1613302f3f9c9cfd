"""What every app's API shares: token authentication, errors as JSON, pagination, the schema
and the URL root (/api/). The endpoints themselves live in each app's ``api`` package."""
