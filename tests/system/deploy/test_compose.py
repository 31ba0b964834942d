"""docker-compose.yml, checked without Docker: services, images, ports, start order,
healthchecks, and that what the services are told agrees with the code (the worker's
settings, the workflow's search attributes) and with each other (roles, databases and
passwords created by the postgres init script)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from sagacity.worker._settings import Settings
from sagacity.worker._temporal_env import RETIRED
from sagacity.workflows._inspection import SEARCH_ATTRIBUTES
from tests.system.deploy.compose_file import (
    ROOT,
    config_content,
    depends_on,
    environment,
    interpolate,
    interpolated,
    load_compose,
    script,
)

ONE_SHOTS = {"temporal-schema", "register-search-attributes", "journal-migrate"}
LONG_RUNNING = {"postgres", "temporal", "temporal-ui", "worker", "inbox"}
IMAGES = {
    "postgres": "postgres",
    "temporal-schema": "temporalio/admin-tools",
    "temporal": "temporalio/server",
    "register-search-attributes": "temporalio/admin-tools",
    "temporal-ui": "temporalio/ui",
}
PUBLISHED = {
    "postgres": ["127.0.0.1:5432:5432"],
    "temporal": ["127.0.0.1:7233:7233"],
    "temporal-ui": ["127.0.0.1:8080:8080"],
    "inbox": ["127.0.0.1:8200:8200", "[::1]:8200:8200"],
}
SETTINGS_ENV = {
    f"{Settings.model_config['env_prefix']}{name}".upper() for name in Settings.model_fields
}
CUSTOM_ENV = {
    "POSTGRES_PASSWORD": "pg-Secret1",
    "TEMPORAL_DB_PASSWORD": "tp-Secret2",
    "JOURNAL_OWNER_PASSWORD": "ow-Secret3",
    "JOURNAL_APP_PASSWORD": "ap-Secret4",
    "TEMPORAL_NAMESPACE": "orders",
    "TEMPORAL_VERSION": "1.99.9",
}


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    return load_compose()


@pytest.fixture(scope="module")
def compose(raw: dict[str, Any]) -> dict[str, Any]:
    """As Compose sees it with no .env and no variables set (a laptop's first `up`)."""
    return interpolated(raw, {})


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def test_interpolates_with_no_variables_set(raw: dict[str, Any]) -> None:
    """`docker compose up postgres` must work without a .env: nothing is `${VAR:?}`."""
    interpolated(raw, {})
    assert "${" not in str(interpolated(raw, {})).replace("$$", "")


def test_the_deployment_has_exactly_these_services(services: dict[str, Any]) -> None:
    assert set(services) == ONE_SHOTS | LONG_RUNNING


@pytest.mark.parametrize(("name", "repository"), sorted(IMAGES.items()))
def test_images_are_the_expected_ones_and_pinned(
    services: dict[str, Any], name: str, repository: str
) -> None:
    image = services[name]["image"]
    repo, _, tag = image.rpartition(":")
    assert repo == repository, image
    assert re.fullmatch(r"\d+(\.\d+)*", tag), f"{name}: pin a release, not {tag!r}"


def test_temporal_server_and_admin_tools_share_one_version(raw: dict[str, Any]) -> None:
    tagged = interpolated(raw, {"TEMPORAL_VERSION": "1.99.9"})["services"]
    for name in ("temporal", "temporal-schema", "register-search-attributes"):
        assert tagged[name]["image"].endswith(":1.99.9"), name


def test_worker_and_migration_are_built_from_the_repo_dockerfile(
    services: dict[str, Any],
) -> None:
    for name in ("worker", "journal-migrate"):
        build = services[name]["build"]
        assert build == {"context": ".", "dockerfile": "Dockerfile"}, name
        assert (ROOT / build["context"] / build["dockerfile"]).is_file()
    assert services["worker"]["image"] == services["journal-migrate"]["image"]
    assert "command" not in services["worker"], "the worker runs the image's CMD"


def test_published_ports_are_the_expected_ones_on_loopback_only(
    services: dict[str, Any],
) -> None:
    published = {name: svc["ports"] for name, svc in services.items() if svc.get("ports")}
    assert published == PUBLISHED


def test_every_dependency_exists_and_the_start_order_has_no_cycle(
    services: dict[str, Any],
) -> None:
    graph = {name: set(depends_on(svc)) for name, svc in services.items()}
    for name, deps in graph.items():
        assert deps <= set(services), f"{name} depends on unknown {deps - set(services)}"
    done: set[str] = set()
    while len(done) < len(graph):
        ready = {n for n, deps in graph.items() if n not in done and deps <= done}
        assert ready, f"dependency cycle among {set(graph) - done}"
        done |= ready


def test_conditions_match_what_the_dependency_is(services: dict[str, Any]) -> None:
    """service_healthy needs a healthcheck; service_completed_successfully needs a
    one-shot; nothing waits on a bare start (a started container is not a ready one)."""
    for name, svc in services.items():
        for dep, condition in depends_on(svc).items():
            if condition == "service_healthy":
                assert services[dep].get("healthcheck"), f"{name} waits for {dep}'s health"
            elif condition == "service_completed_successfully":
                assert dep in ONE_SHOTS, f"{name} waits for long-running {dep} to exit"
            else:
                pytest.fail(f"{name} depends on {dep} with {condition!r}")


def test_start_order(services: dict[str, Any]) -> None:
    assert depends_on(services["postgres"]) == {}
    assert depends_on(services["temporal-schema"]) == {"postgres": "service_healthy"}
    assert depends_on(services["temporal"]) == {"temporal-schema": "service_completed_successfully"}
    assert depends_on(services["register-search-attributes"]) == {"temporal": "service_healthy"}
    assert depends_on(services["temporal-ui"]) == {"temporal": "service_healthy"}
    assert depends_on(services["journal-migrate"]) == {"postgres": "service_healthy"}
    assert depends_on(services["worker"]) == {
        "postgres": "service_healthy",
        "journal-migrate": "service_completed_successfully",
        "temporal": "service_healthy",
        "register-search-attributes": "service_completed_successfully",
    }
    assert depends_on(services["inbox"]) == {
        "journal-migrate": "service_completed_successfully",
        "temporal": "service_healthy",
        "register-search-attributes": "service_completed_successfully",
    }


def test_restart_policies(services: dict[str, Any]) -> None:
    for name in LONG_RUNNING:
        assert services[name]["restart"] == "unless-stopped", name
    for name in ONE_SHOTS:
        assert services[name]["restart"].startswith("on-failure"), name


def test_healthchecks(services: dict[str, Any]) -> None:
    pg = services["postgres"]["healthcheck"]["test"]
    assert pg[0] == "CMD-SHELL" and "pg_isready" in pg[1]
    assert "-h 127.0.0.1" in pg[1], "a socket check passes while the init scripts still run"
    assert services["temporal"]["healthcheck"]["test"][-1] == "7233"


def test_postgres_is_usable_alone_for_the_test_suite(
    compose: dict[str, Any], services: dict[str, Any]
) -> None:
    postgres = services["postgres"]
    assert depends_on(postgres) == {}
    assert postgres["ports"] == ["127.0.0.1:5432:5432"]
    assert environment(postgres)["POSTGRES_USER"] == "postgres"
    assert re.search(r"^CREATE DATABASE test;$", init_sql(compose), re.M)
    targets = [c["target"] for c in postgres["configs"]]
    assert targets == ["/docker-entrypoint-initdb.d/10-sagacity-init.sql"]


# ---- settings ------------------------------------------------------------------------------


def test_every_sagacity_variable_is_a_worker_setting(services: dict[str, Any]) -> None:
    for name, svc in services.items():
        for key in environment(svc):
            if key.startswith("SAGACITY_"):
                assert key in SETTINGS_ENV, f"{name}: {key} is not a field of worker.settings"


def _settings(env: Mapping[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    for key in (*SETTINGS_ENV, *RETIRED, "TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", "/nonexistent/temporal.toml")
    monkeypatch.delenv("TEMPORAL_PROFILE", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return Settings(_env_file=None)  # type: ignore[call-arg]


def test_the_worker_settings_parse_and_point_at_the_compose_services(
    services: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _settings(environment(services["worker"]), monkeypatch)
    assert settings.temporal_address == "temporal:7233"
    assert settings.namespace == "default"
    assert settings.task_queue == "sagacity"
    assert settings.tools == "sagacity.examples.orders:toolbox"
    url = urlsplit(settings.journal_url)
    assert (url.scheme, url.hostname, url.port, url.path) == (
        "postgresql",
        "postgres",
        5432,
        "/sagacity",
    )
    assert url.username == "sagacity_app"


def test_the_worker_signs_checkpoints_with_the_key_the_migration_makes(
    services: dict[str, Any],
) -> None:
    """The log key is made by journal-migrate into a volume the worker reads, read-only:
    never in the database, whose owner the checkpoints guard against."""
    key = environment(services["worker"])["SAGACITY_LOG_KEY"]
    assert environment(services["journal-migrate"])["SAGACITY_LOG_KEY"] == key
    folder = key.rsplit("/", 1)[0]
    assert f"log-keys:{folder}" in services["journal-migrate"]["volumes"]
    assert f"log-keys:{folder}:ro" in services["worker"]["volumes"]
    assert "NoteSigner.generate" in " ".join(services["journal-migrate"]["command"])


def test_the_migration_opens_the_same_journal_as_its_owner(
    services: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = urlsplit(_settings(environment(services["worker"]), monkeypatch).journal_url)
    migrate = urlsplit(_settings(environment(services["journal-migrate"]), monkeypatch).journal_url)
    assert (migrate.hostname, migrate.port, migrate.path) == (
        worker.hostname,
        worker.port,
        worker.path,
    )
    assert migrate.username == "sagacity_owner"
    assert "open_store(Settings().journal_url)" in " ".join(services["journal-migrate"]["command"])


# ---- roles, databases and passwords ---------------------------------------------------------


def init_sql(compose: Mapping[str, Any]) -> str:
    return config_content(compose, "sagacity-init.sql")


def _role_passwords(compose: Mapping[str, Any]) -> dict[str, str]:
    """role -> the password the init script gives it, as the postgres container sees it."""
    sql = init_sql(compose)
    getenv = dict(re.findall(r"^\\getenv (\w+) (\w+)$", sql, re.M))
    roles = dict(re.findall(r"^CREATE ROLE (\w+) LOGIN PASSWORD :'(\w+)';$", sql, re.M))
    pg_env = environment(compose["services"]["postgres"])
    return {role: pg_env[getenv[var]] for role, var in roles.items()}


@pytest.mark.parametrize("env", [{}, CUSTOM_ENV], ids=["defaults", "custom"])
def test_every_client_uses_the_role_and_password_the_init_script_creates(
    raw: dict[str, Any], env: dict[str, str]
) -> None:
    compose = interpolated(raw, env)
    services = compose["services"]
    passwords = _role_passwords(compose)
    assert set(passwords) == {"temporal", "sagacity_owner", "sagacity_app"}
    for name in ("worker", "journal-migrate"):
        url = urlsplit(environment(services[name])["SAGACITY_JOURNAL_URL"])
        assert url.username in passwords, name
        assert unquote(url.password or "") == passwords[url.username], name
    temporal = environment(services["temporal"])
    assert temporal["POSTGRES_PWD"] == passwords[temporal["POSTGRES_USER"]]
    schema_job = environment(services["temporal-schema"])
    assert "-u temporal" in script(services["temporal-schema"])
    assert schema_job["SQL_PASSWORD"] == passwords["temporal"]
    if env:
        assert passwords["sagacity_app"] == env["JOURNAL_APP_PASSWORD"]


def test_the_init_script_creates_what_the_services_connect_to(compose: dict[str, Any]) -> None:
    sql = init_sql(compose)
    owners = dict(re.findall(r"^CREATE DATABASE (\w+) OWNER (\w+);$", sql, re.M))
    assert owners == {
        "temporal": "temporal",
        "temporal_visibility": "temporal",
        "sagacity": "sagacity_owner",
    }
    # New tables are only readable by the worker; journal-grants.sql names what it may
    # append to (tests/system/deploy/test_compose_scripts.py lists every privilege it ends with).
    assert "GRANT SELECT ON TABLES TO sagacity_app;" in sql
    assert not re.search(r"GRANT[^;]*(INSERT|UPDATE|DELETE|TRUNCATE|ALL)[^;]*sagacity_app", sql)
    assert "REVOKE ALL ON DATABASE sagacity FROM PUBLIC;" in sql
    grants = config_content(compose, "journal-grants.sql")
    assert re.findall(r"^GRANT [^;]*;$", grants, re.M) == [
        "GRANT SELECT ON ALL TABLES IN SCHEMA public TO sagacity_app;",
        "GRANT INSERT ON sagacity_journal, sagacity_fences, sagacity_registry_marks TO "
        "sagacity_app;",
        "GRANT INSERT ON sagacity_checkpoints, sagacity_log_nodes, sagacity_log_heads\n"
        "    TO sagacity_app;",
    ]


def test_temporal_persists_to_the_compose_postgres(services: dict[str, Any]) -> None:
    env = environment(services["temporal"])
    assert env["DB"] == "postgres12"
    assert env["POSTGRES_SEEDS"] in services and env["DB_PORT"] == "5432"
    assert env["BIND_ON_IP"] == "0.0.0.0"
    text = script(services["temporal-schema"])
    for db in ("temporal", "temporal_visibility"):
        assert f"--db {db} setup-schema" in text and f"--db {db} update-schema" in text
    dynamic = {c["target"] for c in services["temporal"]["configs"]}
    assert env["DYNAMIC_CONFIG_FILE_PATH"] in dynamic


def test_the_ui_and_the_worker_talk_to_the_server_by_its_service_name(
    services: dict[str, Any],
) -> None:
    for name in ("temporal-ui", "register-search-attributes", "worker", "inbox"):
        assert environment(services[name])["TEMPORAL_ADDRESS"] == "temporal:7233", name


def test_every_service_finds_temporal_by_temporal_variables_alone(
    services: dict[str, Any],
) -> None:
    """One configuration: Temporal's own (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE), which
    the worker and the inbox read as the admin tools and the UI do; sagacity's retired
    variables would be refused (worker._temporal_env)."""
    for name, svc in services.items():
        assert not set(environment(svc)) & set(RETIRED), name


# ---- search attributes --------------------------------------------------------------------


def registered_attributes(services: Mapping[str, Any]) -> dict[str, str]:
    text = script(services["register-search-attributes"])
    return dict(re.findall(r"^register (\w+) (\w+)$", text, re.M))


def test_registration_covers_exactly_the_workflow_search_attributes(
    services: dict[str, Any],
) -> None:
    expected = {key.name: key.indexed_value_type.name.lower() for key in SEARCH_ATTRIBUTES}
    got = {name: kind.lower() for name, kind in registered_attributes(services).items()}
    assert got == expected


def test_registration_uses_the_worker_namespace(raw: dict[str, Any]) -> None:
    for env in ({}, CUSTOM_ENV):
        services = interpolated(raw, env)["services"]
        worker_ns = environment(services["worker"])["TEMPORAL_NAMESPACE"]
        assert worker_ns == env.get("TEMPORAL_NAMESPACE", "default")
        for name in ("register-search-attributes", "inbox"):
            assert environment(services[name])["TEMPORAL_NAMESPACE"] == worker_ns, name
        assert environment(services["temporal-ui"])["TEMPORAL_DEFAULT_NAMESPACE"] == worker_ns


def test_shell_variables_are_escaped_from_compose(raw: dict[str, Any]) -> None:
    """An unescaped `$var` in a script would be replaced by Compose (with an empty string)
    before the shell ever saw it."""
    for name in ("temporal-schema", "register-search-attributes"):
        text = raw["services"][name]["command"][0]
        unescaped = re.findall(r"(?<!\$)\$(?!\$)[{(A-Za-z_@]", text.replace("$$", ""))
        assert not unescaped, f"{name}: unescaped $ in {unescaped}"


def test_interpolation_helper_follows_compose_rules() -> None:
    env = {"SET": "v", "EMPTY": ""}
    assert interpolate("$$x ${SET} $SET", env) == "$x v v"
    assert interpolate("${EMPTY:-d} ${EMPTY-d} ${UNSET-d}", env) == "d  d"
    with pytest.raises(ValueError):
        interpolate("${UNSET:?needed}", env)
