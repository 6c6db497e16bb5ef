"""Running the image: one set of container options, the host's kernel cache shared with them, the
test phases, the devcontainer, where a task runs its command, and kernel-report's stored reports.
Imports the core, versions and image."""
