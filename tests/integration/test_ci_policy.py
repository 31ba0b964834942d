"""With CI set, an unreachable PostgreSQL fails the store tests instead of skipping them;
without CI it skips with a reason that says how to start one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
def test_needs_postgres(postgres_url):
    assert postgres_url
"""


def run_probe(tmp_path: Path, ci: bool) -> subprocess.CompletedProcess[str]:
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE)
    env = dict(os.environ, SAGACITY_TEST_POSTGRES_URL="postgresql://postgres@127.0.0.1:1/none")
    env.pop("CI", None)
    env.pop("SAGACITY_NO_SERVERS", None)  # the probe asks for an unreachable server
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(probe), "-q", "-rs", "-p", "no:cacheprovider",
         "--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml"),
         "--confcutdir", str(ROOT / "tests"), "-p", "tests.conftest"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_unreachable_postgres_fails_under_ci(tmp_path: Path) -> None:
    out = run_probe(tmp_path, ci=True)
    assert out.returncode == 1, out.stdout
    assert "CI is set, so a missing PostgreSQL is a failure" in out.stdout


def test_unreachable_postgres_skips_on_a_laptop_with_a_hint(tmp_path: Path) -> None:
    out = run_probe(tmp_path, ci=False)
    assert out.returncode == 0, out.stdout
    assert "1 skipped" in out.stdout and "docker compose up postgres" in out.stdout
