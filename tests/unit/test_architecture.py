"""Pins the dependency direction (sagacity <- activities <- workflows <- integrations <-
worker) and the public API, so a convenient import cannot quietly couple the core to
Temporal."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import sagacity

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ["sagacity", "activities", "workflows", "integrations", "worker"]
SUBPACKAGES = ("activities", "workflows", "integrations", "worker", "examples")
"""Folders of the repository that are installed as `sagacity.<name>` (symlinks in
sagacity/): one import root, so they never collide with a user's own modules."""
FORBIDDEN = {
    "sagacity": {"temporalio", "activities", "workflows", "integrations", "worker", "examples"},
    "activities": {"workflows", "integrations", "worker"},
    "workflows": {"integrations", "worker"},
    "integrations": {"worker"},
    "worker": set(),
}


def _layer_of(module: str) -> str:
    """`sagacity.workflows.saga` is the workflows layer; `sagacity.chain` the core."""
    parts = module.split(".")
    if parts[0] == "sagacity" and len(parts) > 1 and parts[1] in SUBPACKAGES:
        return parts[1]
    return parts[0]


def imported_roots(path: Path) -> set[str]:
    """The layers (or third-party roots) a module imports; bare top-level names of our
    subpackages are reported as `bare:<name>`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    roots = {_layer_of(name) for name in names}
    roots |= {f"bare:{n.split('.')[0]}" for n in names if n.split(".")[0] in SUBPACKAGES}
    return roots


def _sources(layer: str) -> list[Path]:
    """A layer's own files (the core's without the subpackages linked into it)."""
    folder = ROOT / layer
    linked = [folder / name for name in SUBPACKAGES] if layer == "sagacity" else []
    return [
        path
        for path in folder.rglob("*.py")
        if not any(path.is_relative_to(link) for link in linked)
    ]


@pytest.mark.parametrize("layer", LAYERS)
def test_layers_only_import_downwards(layer: str) -> None:
    assert _sources(layer)
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_roots(path) & FORBIDDEN[layer])
        for path in _sources(layer)
        if imported_roots(path) & FORBIDDEN[layer]
    }
    assert offenders == {}


def test_nothing_imports_our_subpackages_by_their_bare_names() -> None:
    """`import workflows.models` would load a second copy of the module beside
    `sagacity.workflows.models` (two classes for every model), and in a user's project
    it would import their workflows.py instead."""
    folders = [*LAYERS[1:], "examples", "tests", "bench"]
    sources = _sources("sagacity") + [p for f in folders for p in (ROOT / f).rglob("*.py")]
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            r for r in imported_roots(path) if r.startswith("bare:")
        )
        for path in sources
        if any(r.startswith("bare:") for r in imported_roots(path))
    }
    assert offenders == {}


def test_the_subpackages_are_linked_into_the_import_root() -> None:
    for name in SUBPACKAGES:
        link = ROOT / "sagacity" / name
        assert link.is_symlink() and link.resolve() == (ROOT / name).resolve(), link


def test_the_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from temporalio import workflow\nimport sagacity.activities.io_models\nimport workflows\n"
    )
    assert imported_roots(bad) >= {"temporalio", "activities", "bare:workflows"}


def test_importing_the_core_does_not_load_temporalio() -> None:
    code = "import sys, sagacity, sagacity.stores.sqlite; print('temporalio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_public_api_is_pinned() -> None:
    assert sorted(sagacity.__all__) == sorted(
        [
            "GENESIS", "ApprovalDecision", "ApprovalRequest", "AuditFileError",
            "BreakReason", "CompensationContext", "CompensationPlan", "EntryDraft",
            "InvalidEntryError", "JournalConflictError", "JournalEntry", "JournalError",
            "JournalStore", "JournalWriteError", "NotCanonicalError", "PayloadTooLargeError",
            "Phase", "Refusal", "RefusalReason", "SagaClosedError", "SagaStatus",
            "SagacityError", "StoreUnavailableError", "ToolContext", "ToolInputError",
            "ToolKind", "ToolResultError", "ToolSpec", "Toolbox", "ToolboxError",
            "UnknownStoreURLError", "UnknownToolError", "Verdict", "VerifyReport",
            "approval_hash", "approval_payload", "canonical_bytes", "canonical_text",
            "compensable", "compensation", "export_jsonl", "irreversible", "judge",
            "open_store", "parse_decision", "payload_sha256", "plan_compensation", "tool",
            "verify_all", "verify_chain", "verify_jsonl", "verify_store",
            "ApprovalPolicy", "ApprovalRequirement", "ApproverRegistry", "ArgRule",
            "DecisionAudit", "SigningKey", "sign_action", "signed_request",
            "CheckpointLog", "Finding", "NoteSigner", "NoteVerifier", "Problem",
            "SagaCheckpoint", "TreeHead", "check_all", "check_saga",
        ]
    )  # fmt: skip
    for name in sagacity.__all__:
        assert getattr(sagacity, name) is not None
