"""Sharing: the OCI registry and env/lock/images.toml, the image as an archive (export), the kernel cache
shared with containers. Imports the core and build."""
