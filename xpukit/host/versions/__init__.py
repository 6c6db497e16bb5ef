"""The kit's versions: the pins (env/pins.toml), their locks (env/lock/*.txt, the base digests) and the
docs tables generated from them. Imports the host core only."""
