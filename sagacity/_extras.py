"""Which optional extra (pyproject's [project.optional-dependencies]) provides a module.

A plain `pip install sagacity` leaves the extras out; the first command that needs one
(`sagacity inbox` needs jinja2, starlette, uvicorn) would otherwise end in a long
traceback about a module the user never heard of. `missing_extra` turns that
ModuleNotFoundError into the one line that says what to install.
"""

from __future__ import annotations

__all__ = ["EXTRA_OF_MODULE", "missing_extra"]

EXTRA_OF_MODULE: dict[str, str] = {
    "starlette": "inbox",
    "jinja2": "inbox",
    "multipart": "inbox",
    "python_multipart": "inbox",
    "uvicorn": "inbox",
    "mcp": "mcp",
    "pydantic_ai": "pydantic-ai",
    "agents": "openai-agents",
    "temporalio.openai_agents": "openai-agents",  # the temporalio-openai-agents package
    "asyncpg": "bench",
    "matplotlib": "bench",
    "agent_saga": "bench",
}
"""Module (or package) name -> the extra that installs it."""


def missing_extra(exc: BaseException) -> str | None:
    """The one-line hint for `exc` if it is a module of an extra not installed, else None
    (any other import error is a bug or the user's own module, and says so itself)."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    parts = exc.name.split(".")
    packages = (".".join(parts[:n]) for n in range(len(parts), 0, -1))
    extra = next((EXTRA_OF_MODULE[p] for p in packages if p in EXTRA_OF_MODULE), None)
    if extra is None:
        return None
    return (
        f"this needs the {extra!r} extra (module {exc.name!r} is not installed): "
        f"pip install 'sagacity[{extra}]'"
    )
