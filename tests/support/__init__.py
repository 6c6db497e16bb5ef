"""What the tests share, importable without pytest by CI and benchmarks too: real services on
127.0.0.1 (services), a fake host tree (fakehost), Triton kernels (kernels), subprocess probes, the UR
release prefixes (ur_matrix), and helpers two test folders use."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The checkout (or /workspace in the image)."""
