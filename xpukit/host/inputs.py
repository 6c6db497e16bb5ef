"""What a user types into a task, checked on the host before anything runs (a dry run included).

Each check refuses bad input with one line naming the option, the problem and the fix, and exit 2
(:class:`~xpukit.errors.UsageError`), where it would otherwise be taken as the default, fail late in
a container, or write somewhere surprising.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Iterable

from xpukit import targets as targets_mod
from xpukit.errors import UsageError, XpukitError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


_DEVICE_NAME = re.compile(r"[a-z0-9][a-z0-9.\-]*")


def target_names(values: str | Iterable[str] | None) -> list[str]:
    """--target values as target names. The kit's targets and aliases resolve here; any other name
    that looks like an ocloc device (``tgllp``, ``bmg-g31``) goes on to where ocloc runs, which
    knows its devices; anything else is refused here, not in the container."""
    try:
        names = targets_mod.split_targets(values)
    except XpukitError as exc:  # an empty value: what the user typed
        raise UsageError(exc.message, exc.fix) from None
    if names == ["all"]:  # every family this ocloc can build (decided where ocloc runs)
        return names
    unknown = [n for n in names if n not in targets_mod.PRESETS and not _DEVICE_NAME.fullmatch(n)]
    if unknown:
        raise UsageError(
            f"unknown --target {', '.join(map(repr, unknown))}",
            f"use one of: {', '.join(targets_mod.PRESETS)}, all, or an ocloc device name "
            f"(aliases: {', '.join(targets_mod.ALIASES)})",
        )
    return names


def not_empty(option: str, value: str | None, example: str) -> str | None:
    """An option given as '' is refused: it would silently mean the default or the current folder."""
    if value is not None and not str(value).strip():
        raise UsageError(f"--{option} is empty", f"pass --{option} {example}, or leave the option out")
    return value


def positional(task: str, name: str, value: str) -> str:
    """A task's positional argument (``invoke compile KERNEL``): a value that starts with ``-`` is a
    flag invoke did not know, taken as the argument (``invoke compile --help``), not a path."""
    if str(value).startswith("-"):
        raise UsageError(
            f"invoke {task}: invoke took {value} as {name.upper()} (it is no flag of this task)",
            f"for the task's options: invoke --help {task}; a path that starts with '-': ./{value}",
        )
    return value


def assignments(option: str, items: Iterable[str], *, comma: bool = False) -> list[str]:
    """NAME=VALUE items (``comma``: each item may hold several, comma-separated), as given."""
    given = list(items)
    for item in given:
        for part in item.split(",") if comma else [item]:
            name, eq, value = part.partition("=")
            if not eq or not _NAME.fullmatch(name.strip()) or not value.strip():
                several = " (several: comma-separated)" if comma else ""
                raise UsageError(
                    f"--{option} {item!r} is not NAME=VALUE", f"pass e.g. --{option} BLOCK_SIZE=128{several}"
                )
    return given


def seconds(option: str, value: float | str) -> float:
    """A time limit: a finite number >= 0 (0: no limit)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number < 0:
        raise UsageError(f"--{option} {value!r} is not a number of seconds", f"pass e.g. --{option} 600 (0: no limit)")
    return number


def words(option: str, text: str) -> list[str]:
    """A quoted option (``--args "--n 4"``, ``--pytest-args "-k 'a or b'"``) split as a shell splits
    it; an unclosed quote or a trailing backslash is refused here, not as shlex's traceback."""
    try:
        return shlex.split(text or "")
    except ValueError as exc:  # shlex: "No closing quotation", "No escaped character"
        if "quotation" in str(exc):
            problem, fix = "a quote is not closed", f"close it, or escape a literal quote (\\') in --{option}"
        else:
            problem, fix = "it ends in a lone backslash", f"double that backslash (\\\\) or remove it from --{option}"
        raise UsageError(f"--{option} {text!r}: {problem}", fix) from None
