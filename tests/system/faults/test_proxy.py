"""The proxy itself: it forwards, it really cuts, it refuses while down, it restores.
The outage tests trust these counters, so they are checked against a real PostgreSQL."""

from __future__ import annotations

import time

import psycopg
import pytest

from tests.system.faults.proxy import TcpProxy, target_of, through

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(30)]


def test_proxy_forwards_cuts_refuses_and_restores(postgres_url: str) -> None:
    with TcpProxy(*target_of(postgres_url)) as proxy:
        url = through(postgres_url, proxy)
        conn = psycopg.connect(url, connect_timeout=3, autocommit=True)
        assert conn.execute("select 1").fetchone() == (1,)
        assert proxy.stats().forwarded == 1 and proxy.stats().live == 1

        assert proxy.cut() == 1
        with pytest.raises(psycopg.OperationalError):
            conn.execute("select 1")
        conn.close()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(url, connect_timeout=3)
        stats = proxy.stats()
        assert (stats.dropped, stats.live) == (1, 0) and stats.refused >= 1

        proxy.restore()
        with psycopg.connect(url, connect_timeout=3) as again:
            assert again.execute("select 2").fetchone() == (2,)
        assert proxy.stats().forwarded == 2


def test_blackhole_holds_connections_without_an_answer(postgres_url: str) -> None:
    with TcpProxy(*target_of(postgres_url)) as proxy:
        proxy.blackhole()
        started = time.monotonic()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(through(postgres_url, proxy), connect_timeout=2)
        assert time.monotonic() - started >= 1.5  # it waited: no answer, no refusal
        assert proxy.stats().blackholed >= 1
