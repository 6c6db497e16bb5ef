"""The host kit behind ``invoke`` (the ``host`` extra: invoke, docker SDK; plus PyYAML), by subject.

Layers, each importing only those below it (tests/host/test_import_graph.py keeps it so):

- the core, the modules directly in this folder: ``ui`` (output), ``podman``, ``engine`` (Docker or
  podman: its client), ``build_cli`` (the CLI that builds), ``processes`` (the commands and containers a
  task runs, recorded), ``gpu`` (the host's devices), ``settings`` (flags > env > invoke.yaml > defaults,
  every ``auto`` once: the task's :class:`~xpukit.host.settings.Context`), ``inputs`` (checked option values);
- the subjects, in this order: ``versions/`` (the pins, their locks, the docs tables) < ``image/`` (the
  base, the CA bundle it trusts, the BuildKit build and its log, the image plan: built here or pulled by
  the digest the registry's images.toml records, or exported) < ``run/`` (container options and the shared
  kernel cache, where a task runs, test phases, devcontainer, kernel-report's stored reports) <
  ``doctor/``, ``matrix/``, ``verify/`` (side by side, none importing another);
- ``commands/``: the task bodies, each run through ``commands.boundary.guarded``.

``tasks.py`` parses options (with the core's ``settings`` and ``inputs``) and calls ``commands``. The
host may use ``xpukit.runtime`` (the doctor asks its ocloc probe and manifest check), never the other
way round.
"""
