"""Pins the dependency direction (sagacity <- activities <- workflows <- worker) and the
public API, so a convenient import cannot quietly couple the core to Temporal."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import sagacity

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ["sagacity", "activities", "workflows", "worker"]
FORBIDDEN = {
    "sagacity": {"temporalio", "activities", "workflows", "worker"},
    "activities": {"workflows", "worker"},
    "workflows": {"worker"},
    "worker": set(),
}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("layer", LAYERS)
def test_layers_only_import_downwards(layer: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_roots(path) & FORBIDDEN[layer])
        for path in (ROOT / layer).rglob("*.py")
        if imported_roots(path) & FORBIDDEN[layer]
    }
    assert offenders == {}


def test_the_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from temporalio import workflow\nimport activities.models\n")
    assert imported_roots(bad) >= {"temporalio", "activities"}


def test_importing_the_core_does_not_load_temporalio() -> None:
    code = "import sys, sagacity, sagacity.stores.sqlite; print('temporalio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_public_api_is_pinned() -> None:
    assert sorted(sagacity.__all__) == sorted(
        [
            "GENESIS_HASH", "ApprovalDecision", "ApprovalRequest", "AuditFileError",
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
        ]
    )  # fmt: skip
    for name in sagacity.__all__:
        assert getattr(sagacity, name) is not None
