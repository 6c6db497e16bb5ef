"""The image: its base (`invoke base`), the BuildKit build and its log, its plan (content tag, base,
build command) and how it is had: built here or pulled by the digest the lock records. Imports the
core, versions and share."""
