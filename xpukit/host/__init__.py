"""The host kit behind ``invoke``: settings, the image plan, the engine, each task's command and
the doctor's host half. Needs the ``host`` extra (invoke, docker SDK, PyYAML); may use
``xpukit.runtime`` for ``--where host`` runs, never the other way round.
"""
