"""Helpers the test_doctor.py modules of several test folders share."""

from __future__ import annotations

TB = 1024**4


def ENGINE_OK():
    return True, "server 20.10.24"


def BUILDKIT_OK():
    return True, "BuildKit through /usr/bin/docker 20.10.24 (DOCKER_BUILDKIT=1)"


def no_client():
    raise AssertionError("the docker client must not be used when probes are injected")


def lines_for(lines, check):
    return [line for line in lines if line.split()[1:2] == [check]]
