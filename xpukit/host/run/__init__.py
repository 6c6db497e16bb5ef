"""Running the image: one set of container options, the test phases, the devcontainer. Imports the
core, build, share and image."""
