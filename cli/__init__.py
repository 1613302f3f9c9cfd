"""`timeshare`: the command line of the Timeshare portal (talks to its API with a token)."""
