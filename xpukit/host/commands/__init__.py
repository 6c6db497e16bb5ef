"""The task bodies: what each `invoke` task does, each run through :func:`boundary.guarded`. The only
layer tasks.py calls (with the core it parses options with)."""
