"""Sagacity installed from its wheel into a user's project laid out as Temporal's samples
are (its own workflows.py, activities.py, worker.py, starter.py), in a temporary folder
with a fresh virtual environment: the project's worker adds SagacityPlugin to its own
worker, and its starter runs a saga end to end, approval included, on the session's dev
server. Our folders are installed as `sagacity.<name>`, so the project's own module
names do not collide with them.

The fresh environment gets the wheel (`--no-deps`) and sees the test environment's
third-party packages through a .pth file, so nothing is downloaded; it does not see the
repository (the processes run in the project folder, and the editable install's finder
is not loaded there).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import time
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.support.exit_crash import finished
from tests.system.deploy.compose_file import ROOT

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(240)]

PROJECT = {
    "activities.py": '''
        """The project's own activities and tools."""
        import json
        from pathlib import Path

        from temporalio import activity

        from sagacity import CompensationContext, ToolContext, compensable, compensation
        from sagacity import irreversible

        LEDGER = Path("ledger.jsonl")


        def _write(**line):
            with LEDGER.open("a") as f:
                f.write(json.dumps(line) + "\\n")


        class Bank:
            @compensable("refund")
            def charge(self, amount: int, ctx: ToolContext) -> dict:
                _write(op="charge", amount=amount, key=ctx.idempotency_key)
                return {"charge": ctx.idempotency_key}

            @compensation
            def refund(self, ctx: CompensationContext) -> None:
                _write(op="refund", charge=ctx.result["charge"])

            @irreversible
            def wire(self, iban: str, amount: int, ctx: ToolContext) -> dict:
                _write(op="wire", iban=iban, amount=amount)
                return {"wire": ctx.idempotency_key}


        @activity.defn
        async def receipt_text(amount: int) -> str:
            return f"paid {amount}"
    ''',
    "workflows.py": '''
        """The project's own workflow, on the saga API."""
        from datetime import timedelta

        from temporalio import workflow

        with workflow.unsafe.imports_passed_through():
            from sagacity.workflows._saga import Saga


        @workflow.defn
        class PayWorkflow:
            @workflow.run
            async def run(self, amount: int) -> str:
                async with Saga.open() as saga:
                    await saga.call("charge", amount=amount)
                    await saga.call("wire", iban="DE89370400440532013000", amount=amount)
                return await workflow.execute_activity(
                    "receipt_text", amount, start_to_close_timeout=timedelta(seconds=10)
                )
    ''',
    "worker.py": '''
        """The project's worker: its own workflow and activity, plus SagacityPlugin."""
        import asyncio
        import sys

        from temporalio.client import Client
        from temporalio.worker import Worker

        from activities import Bank, receipt_text
        from sagacity import Toolbox, open_store
        from sagacity.worker._plugin import SagacityPlugin
        from workflows import PayWorkflow


        async def main(address: str) -> None:
            store = open_store("sqlite:///journal.db")
            plugin = SagacityPlugin(store=store, toolbox=Toolbox.build(Bank()))
            client = await Client.connect(address, plugins=[plugin])
            worker = Worker(
                client, task_queue="pay", workflows=[PayWorkflow], activities=[receipt_text]
            )
            async with worker:
                print("worker ready", flush=True)
                await asyncio.Event().wait()


        asyncio.run(main(sys.argv[1]))
    ''',
    "starter.py": '''
        """The project's starter: start, approve the wire, read the result."""
        import asyncio
        import json
        import sys
        import uuid

        import sagacity
        from sagacity.worker.client._saga_client import SagaClient
        from workflows import PayWorkflow


        async def main(address: str) -> None:
            client = await SagaClient.connect(address, task_queue="pay")
            saga_id = f"pay-{uuid.uuid4().hex[:8]}"
            handle = await client.start_workflow(PayWorkflow.run, 4200, saga_id=saga_id)
            for _ in range(200):
                if (await client.status(saga_id)).pending_approval is not None:
                    break
                await asyncio.sleep(0.1)
            decision = await client.approve(saga_id, approver="alice")
            print(json.dumps({"result": await handle.result(), "saga_id": saga_id,
                              "approved_seq": decision.seq, "sagacity": sagacity.__file__}))


        asyncio.run(main(sys.argv[1]))
    ''',
}


def _copy_checkout(dest: Path) -> Path:
    """The working tree as git sees it (tracked and untracked, not ignored), symlinks kept."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split("\0")  # fmt: skip
    for name in filter(None, listed):
        source, target = ROOT / name, dest / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(source.readlink())
        else:
            shutil.copy2(source, target)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = _copy_checkout(tmp_path_factory.mktemp("source"))
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(source), "-w", str(out)],
        check=True,
    )
    [built] = out.glob("sagacity-*.whl")
    return built


def test_the_wheel_has_one_import_root(wheel: Path) -> None:
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    roots = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert roots == {"sagacity"}
    for sub in ("activities", "workflows", "worker", "examples"):
        assert f"sagacity/{sub}/__init__.py" in names
    assert "sagacity/workflows/_saga.py" in names and "sagacity/stores/migrations/" in "".join(
        names
    )


def _fresh_venv(where: Path, wheel: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
         str(wheel)],
        check=True,
    )  # fmt: skip
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


async def test_a_samples_layout_project_runs_a_saga(
    temporal_env: WorkflowEnvironment, wheel: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    for name, text in PROJECT.items():
        (project / name).write_text(textwrap.dedent(text).lstrip())
    python = _fresh_venv(tmp_path / "venv", wheel)
    address = temporal_env.client.service_client.config.target_host

    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen(
        [str(python), "worker.py", address], cwd=project, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 60
        while "worker ready" not in (tmp_path / "worker.log").read_text():
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()
            assert time.monotonic() < deadline, "the project's worker never got ready"
            time.sleep(0.1)
        started = subprocess.run(
            [str(python), "starter.py", address],
            cwd=project, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        worker.terminate()
        worker.wait(timeout=20)
        log.close()
    assert finished(started), started.stderr[-4000:]
    out = json.loads(started.stdout.strip().splitlines()[-1])

    assert out["result"] == "paid 4200"
    assert Path(out["sagacity"]).is_relative_to(tmp_path / "venv")  # the wheel, not the repo
    ledger = [json.loads(line) for line in (project / "ledger.jsonl").read_text().splitlines()]
    assert [line["op"] for line in ledger] == ["charge", "wire"]
    verified = subprocess.run(
        [str(python), "-m", "sagacity.worker", "--journal", "sqlite:///journal.db", "verify",
         out["saga_id"]],
        cwd=project, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert finished(verified) and "chain intact (closed)" in verified.stdout, verified
