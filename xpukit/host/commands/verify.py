"""`invoke verify`'s body: the content tag's plan on the configured engine, rebuilt and compared
(xpukit/host/verify/)."""

from __future__ import annotations

from xpukit.host.commands.boundary import guarded
from xpukit.host.image.plan import make_plan
from xpukit.host.settings import Context
from xpukit.host.verify.rebuild import check_against, verify


def run(ctx: Context, against: str = "auto", keep: bool = False) -> int:
    """`invoke verify`: the content tag's plan on the configured engine, then :func:`verify`."""

    @guarded
    def task(ctx: Context) -> int:
        check_against(against)
        if ctx.dry_run:
            print(
                f"would rebuild the {ctx.profile} image from nothing in an empty podman store and compare ({against})"
            )
            return 0
        return verify(ctx, make_plan(ctx), ctx.engine.client(), against, keep)

    return task(ctx)
