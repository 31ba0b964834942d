"""Where the inbox listens (attack_origin_squat, attack_web): both loopback addresses of its
port or it does not start; a restart on the same port works at once; two live inboxes
never share a port. Real sockets on loopback, uvicorn serving, an in-memory source."""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Iterator

import pytest

from sagacity.worker.inbox._listening import InboxStartError, check_port
from sagacity.worker.inbox._server import InboxOptions, start_inbox
from tests.support.fake_source import FakeSource
from tests.support.inbox import free_port


def _has_ipv6() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


needs_ipv6 = pytest.mark.skipif(not _has_ipv6(), reason="this machine has no IPv6 loopback")


def holder(family: socket.AddressFamily, host: str, port: int) -> socket.socket:
    """Another program's listening socket (SO_REUSEADDR set, as most servers do)."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen()
    return sock


@pytest.fixture
def port() -> Iterator[int]:
    yield free_port()


def get(family: socket.AddressFamily, host: str, port: int, *, keep_alive: bool = False) -> str:
    """A GET / as a browser on http://localhost:PORT sends it, to one address."""
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(20)
        sock.connect((host, port))
        close = "" if keep_alive else "Connection: close\r\n"
        sock.sendall(f"GET / HTTP/1.1\r\nHost: localhost:{port}\r\n{close}\r\n".encode())
        data = b""
        while b"</html>" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return data.decode("latin-1")


@needs_ipv6
async def test_an_inbox_refuses_to_start_while_another_program_holds_ipv6_loopback(
    port: int,
) -> None:
    """The squat: a server on [::1]:PORT gets the browser's http://localhost:PORT (Chromium
    tries ::1 first). The inbox does not start beside it, and says where the holder is."""
    squatter = holder(socket.AF_INET6, "::1", port)
    try:
        with pytest.raises(InboxStartError, match=rf"\[::1\]:{port}.*another program holds"):
            async with start_inbox(InboxOptions(port=port), source=FakeSource()):
                pytest.fail("the inbox started beside a squatter on [::1]")
        with pytest.raises(InboxStartError, match=rf"\[::1\]:{port}"):
            check_port(port)  # what `sagacity dev` asks before it starts anything
        # Nothing stayed bound: 127.0.0.1:PORT is free again.
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))
    finally:
        squatter.close()


async def test_an_inbox_refuses_to_start_while_another_program_holds_ipv4_loopback(
    port: int,
) -> None:
    squatter = holder(socket.AF_INET, "127.0.0.1", port)
    try:
        with pytest.raises(InboxStartError, match=rf"127\.0\.0\.1:{port}"):
            async with start_inbox(InboxOptions(port=port), source=FakeSource()):
                pytest.fail("the inbox started beside a squatter on 127.0.0.1")
    finally:
        squatter.close()


@needs_ipv6
async def test_a_started_inbox_answers_on_both_loopback_addresses(port: int) -> None:
    async with start_inbox(InboxOptions(port=port), source=FakeSource()) as running:
        assert running.addresses == [f"127.0.0.1:{port}", f"[::1]:{port}"]
        v4, v6 = await asyncio.gather(
            asyncio.to_thread(get, socket.AF_INET, "127.0.0.1", port),
            asyncio.to_thread(get, socket.AF_INET6, "::1", port),
        )
        for answer in (v4, v6):
            assert answer.startswith("HTTP/1.1 200") and "Waiting for approval" in answer
        # Nobody else can take either address while it runs.
        for family, host in ((socket.AF_INET6, "::1"), (socket.AF_INET, "127.0.0.1")):
            with pytest.raises(OSError) as taken:
                holder(family, host, port).close()
            assert taken.value.errno == errno.EADDRINUSE


async def test_two_live_inboxes_never_share_a_port(port: int) -> None:
    async with start_inbox(InboxOptions(port=port), source=FakeSource()):
        with pytest.raises(InboxStartError, match="another program holds"):
            async with start_inbox(InboxOptions(port=port), source=FakeSource()):
                pytest.fail("a second inbox started on the same port")


async def test_an_inbox_restarts_on_its_port_at_once(port: int) -> None:
    """attack_web: after a stop that closed a browser's keep-alive connection, the old
    connection sits in TIME_WAIT on the port; the restart must not wait it out."""

    def keep_alive() -> tuple[socket.socket, bytes]:
        sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        sock.sendall(f"GET / HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n".encode())
        return sock, sock.recv(65536)

    async with start_inbox(InboxOptions(port=port), source=FakeSource()):
        sock, first = await asyncio.to_thread(keep_alive)
        assert first.startswith(b"HTTP/1.1 200")
    try:
        # The stop closed the kept-alive connection from the server's side: that side
        # still holds the port (FIN-WAIT, then TIME-WAIT), as the old check's plain bind
        # (no SO_REUSEADDR) shows.
        with socket.socket() as plain, pytest.raises(OSError) as in_use:
            plain.bind(("127.0.0.1", port))
        assert in_use.value.errno == errno.EADDRINUSE
        async with start_inbox(InboxOptions(port=port), source=FakeSource()) as again:
            answer = await asyncio.to_thread(get, socket.AF_INET, "127.0.0.1", port)
            assert answer.startswith("HTTP/1.1 200") and again.url == f"http://localhost:{port}"
    finally:
        sock.close()
