"""`invoke matrix`: the cells of env/matrix.toml and where they run. Imports the core and the subjects
below it (build, share, image, run)."""
