"""Where a task runs its command, and running it in the image: what the task bodies share.

``--where auto`` picks the image where an engine answers; the host needs the kit's runtime in this
interpreter. A task makes its image plan once (:func:`plan_for_run`, which also builds or pulls a
missing image) and hands it to everything that needs the image's tag.
"""

from __future__ import annotations

import functools
import importlib.util
import shlex
import sys
from typing import Any

from xpukit.errors import XpukitError
from xpukit.host import processes, ui
from xpukit.host.image import sharing
from xpukit.host.image.plan import ImagePlan, ensure_image, make_plan, print_build_if_missing
from xpukit.host.settings import WHERE_CHOICES, Context, check_choice


def resolve_where(where: str, ctx: Context) -> tuple[str, str]:
    """auto: container where an engine answers, otherwise host. Returns (where, why)."""
    check_choice("where", where, WHERE_CHOICES)
    if where != "auto":
        return where, "--where " + where
    ok, why = ctx.engine.answers()
    return ("container", f"{ctx.engine.kind} answers") if ok else ("host", why)


def require_host_runtime() -> None:
    """The kit's runtime (Triton's Intel backend, numpy) in this interpreter, or a clear error."""
    missing = [m for m in ("triton", "numpy") if importlib.util.find_spec(m) is None]
    if missing:
        raise XpukitError(
            f"the host has no kit runtime ({', '.join(missing)} not installed for {sys.executable})",
            "run it in the image (start a Docker engine; --where container), or "
            "pip install --require-hashes -r env/lock/cpu.txt",
        )


def plan_for_run(ctx: Context) -> ImagePlan:
    """The image plan; in a real run the image is on the engine afterwards (built when missing)."""
    if ctx.dry_run:
        plan = make_plan(ctx)
        print_build_if_missing(ctx, plan)  # the build a real run would start with
        return plan
    plan = make_plan(ctx, base_required=False)
    ensure_image(plan, ctx.engine, functools.partial(sharing.shared_image, ctx, plan))
    return plan


def run_in_image(
    ctx: Context, command: list[str], options: dict[str, Any], what: str = "", plan: ImagePlan | None = None
) -> int:
    """``command`` in the plan's image (``plan``: the task's, already made; else made here)."""
    plan = plan or plan_for_run(ctx)
    if ctx.dry_run:
        print(shlex.join(processes.format_run_cli(ctx.engine.cli_name, plan.tag, command, options)))
        return 0
    if what:
        ui.say(f"{what} in {plan.tag}")
    return ctx.engine.run(plan.tag, command, options)
