"""The matrix on Kubernetes: one Indexed Job whose pod i runs cell i from the image's own source
(the image by digest: --image, else env/lock/images.toml); written out, printed or applied."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

from xpukit import layout
from xpukit.errors import XpukitError
from xpukit.host import ui
from xpukit.host.matrix import cells as mx
from xpukit.host.matrix.schedule import GPU_RESOURCES, IMAGE_SRC, Options, _in_image, _pinned_ur, check_digest
from xpukit.host.settings import Context, check_choice


def _k8s_name(run_name: str) -> str:
    return ("xpukit-matrix-" + run_name).lower()[:63].rstrip("-")


def k8s_image(ctx: Context, explicit: str) -> str:
    """The image by digest: --image, else env/lock/images.toml's entry for the profile (invoke push)."""
    if explicit:
        return check_digest(explicit)
    from xpukit.host.image import registry

    entry = registry.locked_image(ctx.profile)
    if not entry:
        raise XpukitError(
            f"no pushed {ctx.profile} image in env/lock/images.toml for the cluster to pull",
            "invoke push --registry HOST/NAMESPACE (or pass --image REPOSITORY@sha256:...)",
        )
    return entry.reference


def k8s_manifest(ctx: Context, cells: list[mx.Cell], run_name: str, opts: Options) -> dict[str, Any]:
    """An Indexed Job: pod i runs cell i from the image's own source; its result is the last line
    of its log (``xpukit-cell: {json}``) and its exit code."""
    image = k8s_image(ctx, opts.image)
    pinned = _pinned_ur(ctx)
    branches = []
    for index, cell in enumerate(cells):
        command = shlex.join(_in_image(cell, IMAGE_SRC, pinned))
        branches.append(f"  {index}) name={shlex.quote(cell.name)}; {command} ;;")
    script = "\n".join(
        [
            "mkdir -p /results && cd /results",
            'case "$JOB_COMPLETION_INDEX" in',
            *branches,
            '  *) echo "no cell $JOB_COMPLETION_INDEX"; exit 2 ;;',
            "esac",
            "code=$?",
            'result=failed; [ "$code" -eq 0 ] && result=passed',
            'echo "xpukit-cell: {\\"cell\\": \\"$name\\", \\"result\\": \\"$result\\", \\"exit_code\\": $code}"',
            'exit "$code"',
        ]
    )
    env = [
        {"name": "PYTHONPATH", "value": IMAGE_SRC},
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
        *({"name": name, "value": value} for name, value in layout.NO_HOME_ENV.items()),
    ]
    container: dict[str, Any] = {
        "name": "cell",
        "image": image,
        "command": ["bash", "-c", script],
        "workingDir": IMAGE_SRC,
        "env": env,
        "volumeMounts": [{"name": "results", "mountPath": mx.RESULTS}, {"name": "tmp", "mountPath": layout.NO_HOME}],
        "resources": {"requests": {"cpu": "1"}, "limits": {}},
    }
    if ctx.profile == "xpu":
        check_choice("gpu-resource", opts.gpu_resource, GPU_RESOURCES)
        container["resources"]["limits"][opts.gpu_resource] = 1
        env += [{"name": "ONEAPI_DEVICE_SELECTOR", "value": "level_zero:gpu"}]
    if not container["resources"]["limits"]:
        del container["resources"]["limits"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": _k8s_name(run_name), "labels": {"app.kubernetes.io/name": "xpukit-matrix"}},
        "spec": {
            "completionMode": "Indexed",
            "completions": len(cells),
            "parallelism": opts.throttle or len(cells),
            "backoffLimitPerIndex": 0,  # a failed cell is not retried, and does not stop the others
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "xpukit-matrix"}},
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": {"runAsUser": layout.UID, "runAsGroup": layout.UID},
                    "containers": [container],
                    "volumes": [{"name": "results", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}],
                },
            },
        },
    }


def render_yaml(manifest: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(manifest, sort_keys=False, width=120)


def run_kubernetes(ctx: Context, cells: list[mx.Cell], opts: Options, out_dir: Path) -> int:
    run_name = mx.run_id()
    text = render_yaml(k8s_manifest(ctx, cells, run_name, opts))
    if opts.manifest_out and not ctx.dry_run:
        Path(opts.manifest_out).write_text(text)
        ui.say(f"matrix: Indexed Job manifest ({len(cells)} indexes) written to {opts.manifest_out}")
    if not opts.apply or ctx.dry_run:
        if not opts.manifest_out or ctx.dry_run:
            print(text, end="")
        return 0
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise XpukitError("--apply needs kubectl, which is not on PATH", "install kubectl, or apply the --out file")
    probe = subprocess.run([kubectl, "config", "current-context"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        raise XpukitError(
            "--apply: kubectl has no cluster configured (no current context)",
            "set KUBECONFIG or `kubectl config use-context NAME`; or write the manifest with --out",
        )
    proc = subprocess.run([kubectl, "apply", "-f", "-"], input=text, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise XpukitError(f"kubectl apply failed: {proc.stderr.strip()[:300]}", "check the cluster and the manifest")
    name = _k8s_name(run_name)
    ui.say(f"matrix: {proc.stdout.strip()}; follow it with `kubectl get pods -l job-name={name}`")
    return 0
