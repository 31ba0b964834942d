# The sagacity worker image: `docker compose build worker`, or
#   docker build -t sagacity-worker .
# It installs the project (not editable, with the web inbox's extra: the `inbox` service
# runs `sagacity inbox` from the same image) into a virtual environment and runs the worker;
# configuration comes from SAGACITY_* environment variables (worker/_settings.py).

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# The packages pyproject.toml ships (a test checks this list against it): sagacity and
# the folders linked into it as its subpackages, plus the files its metadata names.
# Copied explicitly so nothing else (tests, .env, journals) gets in.
COPY pyproject.toml README.md ./
COPY sagacity ./sagacity
COPY activities ./activities
COPY workflows ./workflows
COPY contrib ./contrib
COPY worker ./worker
COPY examples ./examples
RUN python -m venv /opt/sagacity \
    && /opt/sagacity/bin/pip install --no-cache-dir ".[inbox]" \
    && /opt/sagacity/bin/python -c "import sagacity.activities, sagacity.workflows, sagacity.contrib, sagacity.worker, sagacity.examples"

FROM python:3.11-slim
ENV PATH=/opt/sagacity/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    SAGACITY_HOME=/app/.sagacity
COPY --from=build /opt/sagacity /opt/sagacity
# An unprivileged user; /app/.sagacity (SAGACITY_HOME, sagacity's data home) is where the
# example shop and a SQLite journal would live, /app/keys the worker's log key (volumes in
# docker-compose.yml).
RUN useradd --system --uid 10001 --user-group --home-dir /app --shell /usr/sbin/nologin sagacity \
    && mkdir -p /app/.sagacity /app/keys \
    && chown -R sagacity:sagacity /app
WORKDIR /app
USER sagacity
# Temporal is found by Temporal's own environment configuration (TEMPORAL_ADDRESS,
# TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*...), set by docker-compose.yml.
# SIGTERM stops polling and lets running activities finish (worker/_run.py).
STOPSIGNAL SIGTERM
CMD ["python", "-m", "sagacity.worker", "worker"]
