"""The host kit behind ``invoke`` (the ``host`` extra: invoke, docker SDK; plus PyYAML).

Layers, each importing only those above it:
``ui`` (output) -> ``settings`` (flags > env > invoke.yaml > defaults, every ``auto`` once; uses
``trust`` for the CA bundle and ``gpu`` for the profile) -> ``pins``/``lock``/``build`` (pins as build
args, content tag, BuildKit command) -> ``plan`` (one image plan per task) and ``containers`` (one
set of run options) -> ``testing``, ``doctor``, ``base`` -> ``commands`` (what each task does).
``tasks.py`` parses options and calls ``commands``. The host may use ``xpukit.runtime`` (the doctor
asks its ocloc probe and manifest check), never the other way round.
"""
