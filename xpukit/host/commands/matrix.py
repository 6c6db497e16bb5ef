"""`invoke matrix`'s body: the cells chosen, then run where ``--scheduler`` says (xpukit/host/matrix/)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from xpukit.host.commands.boundary import guarded
from xpukit.host.matrix import cells as mx
from xpukit.host.matrix.kubernetes import run_kubernetes
from xpukit.host.matrix.schedule import (
    RUNTIMES,
    SCHEDULERS,
    Options,
    prepare,
    print_cell_scripts,
    run_local,
    run_slurm,
    select_cells,
)
from xpukit.host.settings import Context, check_choice

__all__ = ["Options", "run"]  # Options: what tasks.py fills from its flags


@guarded
def run(ctx: Context, opts: Options) -> int:
    check_choice("scheduler", opts.scheduler, SCHEDULERS)
    check_choice("runtime", opts.runtime, RUNTIMES)
    out_dir = Path(opts.out_dir).expanduser().resolve() if opts.out_dir else mx.DEFAULT_OUT
    cells = select_cells(ctx, opts, out_dir)
    if not cells:
        return 0
    if opts.scheduler == "kubernetes":
        return run_kubernetes(ctx, cells, opts, out_dir)
    prepared = prepare(ctx, opts, cells, out_dir)
    if ctx.dry_run:
        try:
            if opts.scheduler == "slurm":
                return run_slurm(prepared, opts, dry_run=True)
            print("# local: each cell script runs as `bash run.sh`, " + f"{opts.jobs or os.cpu_count()} at a time")
            print_cell_scripts(prepared)
            return 0
        finally:
            shutil.rmtree(prepared.run.parent, ignore_errors=True)  # the dry run's temp folder
    if opts.scheduler == "slurm":
        return run_slurm(prepared, opts, dry_run=False)
    return run_local(prepared, opts.jobs, opts.timeout)
