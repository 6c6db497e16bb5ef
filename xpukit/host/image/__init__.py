"""The image: its base (`invoke base`), the BuildKit build and its log, its plan (content tag, base,
build command) and how it is had: built here or pulled by the digest the lock records (the OCI
registry and env/lock/images.toml), or carried as an archive (export). Imports the core and versions."""
