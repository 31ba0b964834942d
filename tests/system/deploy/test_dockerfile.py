"""The worker image, checked without Docker: it installs the project (every package
pyproject.toml ships, nothing else from the repo), runs the worker unprivileged, and the
build context leaves out secrets and local state but none of what the build copies."""

from __future__ import annotations

import shlex
import tomllib

import pytest

from tests.system.deploy.compose_file import (
    DOCKERFILE,
    ROOT,
    Instruction,
    dockerfile_instructions,
    dockerignore_excludes,
    dockerignore_patterns,
)


@pytest.fixture(scope="module")
def instructions() -> list[Instruction]:
    return dockerfile_instructions(DOCKERFILE.read_text(encoding="utf-8"))


def shipped_packages() -> set[str]:
    """Folders pyproject.toml ships: its top-level packages (`include = ["sagacity*"]`)
    and the folders linked into them as subpackages (sagacity/workflows -> ../workflows)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    include = project["tool"]["setuptools"]["packages"]["find"]["include"]
    tops = {pattern.rstrip("*").rstrip(".") for pattern in include}
    linked = {
        str(child.resolve().relative_to(ROOT))
        for top in tops
        for child in (ROOT / top).iterdir()
        if child.is_symlink()
    }
    return tops | linked


def copied_sources(instructions: list[Instruction], stage: int) -> set[str]:
    sources: set[str] = set()
    for ins in instructions:
        if ins.keyword == "COPY" and ins.stage == stage and "--from" not in ins.args:
            *srcs, _dest = shlex.split(ins.args)
            sources.update(s.rstrip("/").removeprefix("./") for s in srcs)
    return sources


def final_stage(instructions: list[Instruction]) -> int:
    return max(ins.stage for ins in instructions)


def test_every_stage_is_python_3_11_slim(instructions: list[Instruction]) -> None:
    froms = [ins.args.split()[0] for ins in instructions if ins.keyword == "FROM"]
    assert froms and all(image == "python:3.11-slim" for image in froms), froms


def test_the_build_copies_the_project_metadata_and_every_shipped_package(
    instructions: list[Instruction],
) -> None:
    build_stage = next(i.stage for i in instructions if i.keyword == "RUN" and "pip" in i.args)
    sources = copied_sources(instructions, build_stage)
    assert {"pyproject.toml", "README.md"} <= sources  # README: pyproject's readme field
    assert shipped_packages() <= sources, f"not copied: {shipped_packages() - sources}"
    assert sources <= shipped_packages() | {"pyproject.toml", "README.md"}, (
        "the image gets only what the distribution ships"
    )
    for source in sources:
        assert (ROOT / source).exists(), source


def test_the_project_is_installed_not_run_from_source(instructions: list[Instruction]) -> None:
    installs = [i.args for i in instructions if i.keyword == "RUN" and "pip install" in i.args]
    assert installs, "no pip install"
    words = shlex.split(installs[0].replace("&&", " && "))
    after = words[words.index("install") + 1 :]
    target = next(w for w in after if not w.startswith("-"))
    # The project itself, with the inbox extra (the compose `inbox` service's web deps).
    assert target in (".", ".[inbox]"), f"installs {target!r}, not the project"
    assert "-e" not in after and "--editable" not in after


def test_the_final_stage_runs_the_worker_unprivileged(instructions: list[Instruction]) -> None:
    last = final_stage(instructions)
    final = [i for i in instructions if i.stage == last]
    cmd = [i for i in final if i.keyword == "CMD"]
    assert len(cmd) == 1 and cmd[0].json_args() == ["python", "-m", "sagacity.worker", "worker"]
    assert not [i for i in final if i.keyword == "ENTRYPOINT"]
    users = [i.args for i in final if i.keyword == "USER"]
    assert users and users[-1] not in ("root", "0"), "the worker must not run as root"
    assert any(i.keyword == "COPY" and "--from=" in i.args for i in final), "multi-stage copy"
    assert any(i.keyword == "WORKDIR" and i.args == "/app" for i in final)


@pytest.mark.parametrize(
    "path",
    [
        ".env",
        ".env.production",
        ".venv/bin/python",
        ".git/config",
        ".sagacity/journal.db",
        "tests/conftest.py",
        "worker/__pycache__/app.cpython-311.pyc",
        "journal.db",
        "tests/system/browser/screenshots/saga-timeline.png",
    ],
)
def test_the_build_context_leaves_out_secrets_and_local_state(path: str) -> None:
    assert dockerignore_excludes(dockerignore_patterns(), path), path


def test_the_build_context_keeps_everything_the_build_copies(
    instructions: list[Instruction],
) -> None:
    patterns = dockerignore_patterns()
    needed = copied_sources(instructions, 0) | {
        "sagacity/stores/migrations/0001_journal.sql",
        "worker/__main__.py",
        "examples/orders.py",
    }
    for source in sorted(needed):
        for path in [source, *(str(p.relative_to(ROOT)) for p in (ROOT / source).rglob("*.py"))]:
            assert not dockerignore_excludes(patterns, path), f".dockerignore drops {path}"


def test_dockerignore_matcher_follows_docker_rules() -> None:
    assert dockerignore_excludes(["**/*.pyc"], "a/b/c.pyc")
    assert dockerignore_excludes(["**/*.pyc"], "c.pyc")
    assert dockerignore_excludes(["tests"], "tests/deep/file.py")
    assert not dockerignore_excludes(["tests"], "worker/tests.py")
    assert not dockerignore_excludes(["*.md", "!README.md"], "README.md")
    assert dockerignore_excludes(["*.md", "!README.md"], "CHANGES.md")
