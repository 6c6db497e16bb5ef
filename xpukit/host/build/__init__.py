"""Building the image: the pins (env/pins.toml) and their locks, the base, the BuildKit command and its
log, the docs tables generated from the pins. Imports the host core only."""
