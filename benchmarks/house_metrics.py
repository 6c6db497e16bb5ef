#!/usr/bin/env python3
"""The house's size, before and after a refactor: files and lines of xpukit/ (Python and C), the
largest modules and classes, gotos in the C, and the package's import statements.

    python benchmarks/house_metrics.py [TREE]          # TREE: a checkout (default: this one)
    git archive 4463032 | tar -x -C /tmp/before && python benchmarks/house_metrics.py /tmp/before

The reach-in count is the test's own: ``python -m tests.host.test_reach_ins [TREE]``.
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path


def main(root: Path) -> None:
    package = root / "xpukit"
    if not package.is_dir():
        raise SystemExit(f"house_metrics: {root} has no xpukit/ folder (pass a checkout of this repository)")
    python = sorted(package.rglob("*.py"))
    c_parts = sorted([*package.rglob("*.c"), *package.rglob("*.h")])
    sizes = {path.relative_to(root).as_posix(): len(path.read_text().splitlines()) for path in python + c_parts}
    print(f"files {len(sizes)}, lines {sum(sizes.values())}")
    largest = sorted(sizes.items(), key=lambda item: -item[1])[:6]
    print("largest modules:", ", ".join(f"{name} {n}" for name, n in largest))
    classes = []
    imports = 0
    for path in python:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                classes.append((node.end_lineno - node.lineno + 1, node.name))  # type: ignore[operator]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("xpukit"):
                imports += 1
            elif isinstance(node, ast.Import):
                imports += sum(alias.name.startswith("xpukit") for alias in node.names)
    print("largest classes:", ", ".join(f"{name} {n}" for n, name in sorted(classes, reverse=True)[:4]))
    print("gotos in the C:", sum(len(re.findall(r"\bgoto\b", path.read_text())) for path in c_parts))
    print(f"modules {len(python)}, package import statements {imports}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "tree",
        nargs="?",
        type=Path,
        default=Path(__file__).resolve().parent.parent,
        help="a checkout (default: this one)",
    )
    main(parser.parse_args().tree)
