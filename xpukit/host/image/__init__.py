"""The image a task uses: its plan (content tag, base, build command) and how it is had: built here or
pulled by the digest the lock records. Imports the core, build and share."""
