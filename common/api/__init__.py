"""What every app's API shares. The endpoints live in each app's ``api`` package; the URL
root (/api/), token authentication and the token page belong to the project."""
