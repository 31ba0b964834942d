"""Pins the shape a newcomer relies on: the dependency direction (core <- activities <-
workflows <- contrib <- worker), no import cycle, private modules behind small public
packages, the public API, and files a person can read in one sitting."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import sagacity
import sagacity.worker

ROOT = Path(__file__).resolve().parents[2]
LINKED = ("activities", "workflows", "contrib", "worker", "examples")
"""Folders of the repository installed as `sagacity.<name>` (symlinks in sagacity/): one
import root, so they never collide with a user's own workflows.py or worker.py."""
LAYERS = {
    "core": {"temporalio", "activities", "workflows", "contrib", "worker", "examples"},
    "activities": {"workflows", "contrib", "worker"},
    "workflows": {"contrib", "worker"},
    "contrib": {"worker"},
    "worker": set(),
    "examples": set(),
}
MAX_LINES = 400


def _module_of(path: Path) -> str:
    """`workflows/_saga.py` is `sagacity.workflows._saga`; `sagacity/journal/__init__.py`
    is `sagacity.journal`."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts if parts[0] == "sagacity" else ["sagacity", *parts])


def sources() -> dict[str, Path]:
    """Every module of the distribution, by its import name (the linked folders read
    once, from their real place)."""
    found: dict[str, Path] = {}
    for top in ("sagacity", *LINKED):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if top == "sagacity" and len(rel.parts) > 1 and rel.parts[1] in LINKED:
                continue
            found[_module_of(path)] = path
    return found


def layer_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "sagacity":
        return parts[0]
    if len(parts) > 1 and parts[1] in ("activities", "workflows", "contrib", "worker", "examples"):
        return parts[1]
    return "core"


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The modules `module` imports at run time (anywhere in it, but not under
    TYPE_CHECKING): `from pkg import name` is an edge to `pkg.name` when that is a
    module, to `pkg` otherwise."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skipped = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and _type_checking(node)
        for body in node.body
        for inner in ast.walk(body)
    }
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            for alias in node.names:
                name = f"{base}.{alias.name}"
                found.add(name if name in known else base)
    return found


def graph() -> dict[str, set[str]]:
    modules = sources()
    known = set(modules)
    return {
        module: {name for name in imports(module, path, known) if name in known} - {module}
        for module, path in modules.items()
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def absolute_imports(path: Path) -> list[str]:
    """The modules a file imports by absolute name (`import a.b`, `from a.b import c`)."""
    tree = ast.parse(path.read_text())
    return [
        alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
        for alias in node.names
    ] + [
        node.module for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
    ]  # fmt: skip


def test_layers_only_import_downwards() -> None:
    offenders = {}
    for module, path in sources().items():
        layer = layer_of(module)
        names = absolute_imports(path)
        bad = sorted({layer_of(name) for name in names} & LAYERS[layer])
        if bad:
            offenders[module] = bad
    assert offenders == {}


def test_nothing_imports_our_subpackages_by_their_bare_names() -> None:
    """`import workflows._models` would load a second copy of a module beside
    `sagacity.workflows._models` (two classes for every model), and in a user's project
    it would import their own workflows.py instead."""
    bare = ("activities", "workflows", "worker", "examples", "integrations")
    files = [*sources().values(), *(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]
    offenders = {}
    for path in files:
        names = absolute_imports(path)
        if found := sorted(n for n in names if n.split(".")[0] in bare):
            offenders[str(path.relative_to(ROOT))] = found
    assert offenders == {}


def test_there_is_no_import_cycle() -> None:
    assert cycles(graph()) == []


def test_the_cycle_finder_sees_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_modules_are_private_behind_their_packages() -> None:
    public = [
        module
        for module, path in sources().items()
        if path.name not in ("__init__.py", "__main__.py")
        and not path.name.startswith("_")
        and layer_of(module) != "examples"
    ]
    assert public == []


def test_no_module_is_longer_than_a_sitting() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in sources().values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_subpackages_are_linked_into_the_import_root() -> None:
    links = {p.name for p in (ROOT / "sagacity").iterdir() if p.is_symlink()}
    assert links == set(LINKED)
    for name in LINKED:
        assert (ROOT / "sagacity" / name).resolve() == (ROOT / name).resolve()


def test_importing_the_core_does_not_load_temporalio() -> None:
    code = (
        "import sys, sagacity, sagacity.stores, sagacity.audit, sagacity.tlog, "
        "sagacity.approval, sagacity.text; print('temporalio' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _public(module: object) -> set[str]:
    """The names a reader of the package sees as its own: not private, not a submodule,
    not a third-party name it happens to import."""
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, type(sys))
        and str(getattr(value, "__module__", "sagacity")).startswith("sagacity")
    }


@pytest.mark.parametrize(
    "package",
    [
        "sagacity", "sagacity.tools", "sagacity.journal", "sagacity.stores",
        "sagacity.approval", "sagacity.audit", "sagacity.tlog", "sagacity.text",
        "sagacity.activities", "sagacity.workflows", "sagacity.worker",
        "sagacity.worker.client", "sagacity.worker.cli", "sagacity.worker.inbox",
        "sagacity.contrib.mcp", "sagacity.contrib.openai_agents", "sagacity.contrib.pydantic_ai",
    ],
)  # fmt: skip
def test_a_package_exports_exactly_what_it_declares(package: str) -> None:
    module = __import__(package, fromlist=["_"])
    assert _public(module) - {"annotations"} <= set(module.__all__)
    assert all(hasattr(module, name) for name in module.__all__)


ROOT_API = sorted(
    [
        # declaring tools
        "tool", "compensable", "compensation", "irreversible", "Toolbox",
        "ToolContext", "CompensationContext", "ApprovalPolicy", "ArgRule",
        # opening a journal and reading it
        "open_store", "default_journal_url", "JournalStore", "JournalEntry", "Phase",
        "SagaStatus",
        # the errors a user catches
        "SagacityError", "ToolboxError", "ToolInputError", "JournalError",
        "StoreUnavailableError", "SagaClosedError",
    ]
)  # fmt: skip
TEMPORAL_API = sorted(
    [
        # a workflow opens a saga, or runs the prebuilt one
        "Saga", "SagaOptions", "SagaInput", "ToolCall", "SagaResult", "AgentSagaWorkflow",
        # what a saga raises in the workflow
        "SagaFailedError", "SagaUsageError", "StepError",
        # a worker adds the plugin; a client starts, approves and reads sagas
        "SagacityPlugin", "SagaClient",
        # the errors a client catches
        "SagaClientError", "SagaExistsError", "SagaNotFoundError", "NothingPendingError",
        "ApprovalRefusedError", "TemporalUnavailableError",
    ]
)  # fmt: skip


def test_the_root_api_is_what_a_user_declares_tools_and_opens_a_store_with() -> None:
    assert sorted(sagacity.__all__) == ROOT_API


def test_the_temporal_side_is_one_module() -> None:
    assert sorted(sagacity.worker.__all__) == TEMPORAL_API


def test_the_quick_start_imports_from_two_modules_at_most() -> None:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("## Quick start")
    end = readme.index("\n## ", start + 1)
    blocks = re.findall(r"```python\n(.*?)```", readme[start:end], flags=re.S)
    assert blocks
    used = set()
    for block in blocks:
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sagacity"):
                used.add(node.module)
            elif isinstance(node, ast.Import):
                used.update(a.name for a in node.names if a.name.startswith("sagacity"))
    assert used <= {"sagacity", "sagacity.worker"}, used


def _test_folders(tier: str) -> list[Path]:
    base = ROOT / "tests" / tier
    return sorted(p for p in base.rglob("*") if p.is_dir() and p.name != "__pycache__")


@pytest.mark.parametrize("tier", ["pure", "integration"])
def test_the_tiers_mirror_the_packages(tier: str) -> None:
    """tests/<tier>/journal/ tests sagacity/journal/, tests/<tier>/worker/cli/ tests
    worker/cli/: a folder's first part is a package of the import root (the second too,
    under a package with subpackages); below that, a folder is one feature's rig."""
    base = ROOT / "tests" / tier
    source = ROOT / "sagacity"
    strays = []
    for folder in _test_folders(tier):
        parts = folder.relative_to(base).parts
        package = source / parts[0]
        if not (package / "__init__.py").is_file():
            strays.append(folder)
            continue
        subpackages = [p for p in package.iterdir() if (p / "__init__.py").is_file()]
        if len(parts) > 1 and subpackages and not (package / parts[1] / "__init__.py").is_file():
            strays.append(folder)
    assert strays == [], f"test folders that name no package: {strays}"
