"""`invoke doctor`: host and in-image checks, one finding each. Imports the core only."""
