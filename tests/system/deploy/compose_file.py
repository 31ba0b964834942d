"""Reading docker-compose.yml, the Dockerfile and .dockerignore the way Docker would, far
enough to check them without a Docker engine (none runs on the CI machine)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


def load_compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(data, dict), "docker-compose.yml is not a mapping"
    return data


class InterpolationError(ValueError):
    """A `${VAR:?message}` whose variable is unset, or a malformed `${...}`."""


_VARIABLE = re.compile(r"\$(?:(?P<dollar>\$)|\{(?P<braced>[^}]*)\}|(?P<named>[A-Za-z_]\w*))")
_BRACED = re.compile(r"^(?P<name>[A-Za-z_]\w*)(?:(?P<op>:-|-|:\?|\?|:\+|\+)(?P<arg>.*))?$", re.S)


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose's variable interpolation: `$$` is a literal `$`; `${VAR}`, `$VAR`,
    `${VAR:-default}`, `${VAR-default}`, `${VAR:?err}`, `${VAR?err}`, `${VAR:+alt}`."""

    def replace(match: re.Match[str]) -> str:
        if match["dollar"]:
            return "$"
        if match["named"]:
            return env.get(match["named"], "")
        braced = _BRACED.match(match["braced"])
        if braced is None:
            raise InterpolationError(f"malformed variable ${{{match['braced']}}}")
        name, op, arg = braced["name"], braced["op"], braced["arg"] or ""
        value = env.get(name)
        if op is None:
            return value or ""
        if op == ":-":
            return value if value else interpolate(arg, env)
        if op == "-":
            return value if value is not None else interpolate(arg, env)
        if op in (":?", "?"):
            if value is None or (op == ":?" and not value):
                raise InterpolationError(f"required variable {name} is unset: {arg}")
            return value
        if op == ":+":
            return interpolate(arg, env) if value else ""
        return interpolate(arg, env) if value is not None else ""

    return _VARIABLE.sub(replace, text)


def interpolated(node: Any, env: Mapping[str, str]) -> Any:
    """The whole compose document with every string interpolated, as Compose sees it."""
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [interpolated(item, env) for item in node]
    if isinstance(node, dict):
        return {key: interpolated(value, env) for key, value in node.items()}
    return node


def environment(service: Mapping[str, Any]) -> dict[str, str]:
    """A service's `environment`, in either of Compose's two forms, as a dict."""
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        pairs = (item.split("=", 1) for item in raw)
        return {pair[0]: pair[1] if len(pair) > 1 else "" for pair in pairs}
    return {key: "" if value is None else str(value) for key, value in raw.items()}


def depends_on(service: Mapping[str, Any]) -> dict[str, str]:
    """{dependency: condition}; the short list form means service_started."""
    raw = service.get("depends_on") or {}
    if isinstance(raw, list):
        return {name: "service_started" for name in raw}
    return {name: (spec or {}).get("condition", "service_started") for name, spec in raw.items()}


def script(service: Mapping[str, Any]) -> str:
    """The shell script of a one-shot service run as `entrypoint: [sh, -ec]` + command."""
    assert service.get("entrypoint") == ["/bin/sh", "-ec"], service.get("entrypoint")
    command = service["command"]
    assert isinstance(command, list) and len(command) == 1, command
    return str(command[0])


def config_content(document: Mapping[str, Any], name: str) -> str:
    return str(document["configs"][name]["content"])


# ---- Dockerfile ------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    stage: int

    def json_args(self) -> Any:
        return json.loads(self.args)


def dockerfile_instructions(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comments dropped, each tagged with
    the index of its build stage (0 for the first FROM)."""
    instructions: list[Instruction] = []
    stage = -1
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = (pending + stripped).strip()
        pending = ""
        keyword, _, args = full.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            stage += 1
        instructions.append(Instruction(keyword, args.strip(), stage))
    assert not pending, "Dockerfile ends inside a continued line"
    return instructions


# ---- .dockerignore -------------------------------------------------------------------------


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out)


def dockerignore_excludes(patterns: list[str], path: str) -> bool:
    """Whether Docker leaves `path` (relative, with /) out of the build context: the last
    matching pattern wins, `!` re-includes, and excluding a folder excludes its contents."""
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    excluded = False
    for raw in patterns:
        negate = raw.startswith("!")
        pattern = raw[1:] if negate else raw
        pattern = pattern.strip().strip("/")
        if pattern.startswith("./"):
            pattern = pattern[2:]
        regex = _pattern_regex(pattern)
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            excluded = not negate
    return excluded


def dockerignore_patterns() -> list[str]:
    lines = DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
