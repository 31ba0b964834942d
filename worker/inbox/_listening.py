"""The inbox's listening sockets: every loopback address of its port, or none.

A passkey is bound to its origin, http://localhost:PORT, and a browser resolves
`localhost` to both 127.0.0.1 and ::1 (Chromium tries ::1 first). Whoever listens on
either address of that port IS the origin to the browser: a page there can ask the
person's passkey to sign any statement it likes. So the inbox binds both loopback
addresses of its port before it announces its address, and refuses to start, naming the
address and what to do, when another program holds either one. A machine without IPv6
has no ::1 for anyone to take: the inbox says so and listens on 127.0.0.1 alone.

The sockets are bound with SO_REUSEADDR, so a restart on the same port works while the
last run's connections sit in TIME_WAIT; on Linux that never lets a second socket bind an
address a live listener holds, and each socket listens at once, so two inboxes cannot
share a port. The bound sockets are handed to uvicorn: the check is the bind itself.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field

from sagacity._errors import SagacityError

__all__ = ["InboxStartError", "Listeners", "bind_listeners", "check_port", "listen_hosts"]

V4_LOOPBACK = "127.0.0.1"
V6_LOOPBACK = "::1"
_NO_IPV6 = {errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT, errno.EPROTONOSUPPORT}


class InboxStartError(SagacityError):
    """The inbox could not start (its port taken, a bad option)."""


def shown(host: str, port: int) -> str:
    """host:port as a person types it ([::1]:8200 for IPv6)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def listen_hosts(host: str, *, localhost_origin: bool) -> tuple[list[str], list[str]]:
    """The addresses to bind for `host`: (required, loopback ones a browser reaches for
    `localhost` that `host` does not cover). The second list is only filled when the
    passkey origin is http://localhost on this port."""
    name = host.strip("[]")
    required = [V4_LOOPBACK, V6_LOOPBACK] if name.lower() == "localhost" else [name]
    if not localhost_origin:
        return required, []
    covers_v4 = {V4_LOOPBACK, "0.0.0.0", "::"}
    covers_v6 = {V6_LOOPBACK, "::"}
    extra = []
    if not covers_v4 & set(required):
        extra.append(V4_LOOPBACK)
    if not covers_v6 & set(required):
        extra.append(V6_LOOPBACK)
    return required, extra


@dataclass
class Listeners:
    """Bound, listening sockets (closed by `close` unless handed over) and what to say."""

    sockets: list[socket.socket] = field(default_factory=list)
    addresses: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()
        self.sockets.clear()


def _family(host: str) -> socket.AddressFamily:
    try:
        return socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        return socket.AF_INET  # a name: resolved by bind (allowed only with --allow-remote)


def _bind(host: str, port: int) -> socket.socket:
    family = _family(host)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            # "::" answers IPv4 too (it covers 127.0.0.1); ::1 is IPv6 only anyway.
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0 if host == "::" else 1)
        sock.bind((host, port))
        sock.listen(2048)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _taken(host: str, port: int, exc: OSError) -> InboxStartError:
    where = shown(host, port)
    return InboxStartError(
        f"the inbox cannot listen on {where} ({exc.strerror or exc}): another program holds "
        f"it. A browser opening http://localhost:{port} may reach that program instead of "
        f"the inbox, and a page there can have a person's passkey sign any decision, so the "
        f"inbox does not start. See who holds it with `ss -ltnp 'sport = :{port}'`, stop "
        "it, or pick another port with --port"
    )


def bind_listeners(host: str, port: int, *, localhost_origin: bool) -> Listeners:
    """Bind and listen on every address the inbox needs on `port`, or raise
    InboxStartError naming the address another program holds (nothing stays bound)."""
    required, extra = listen_hosts(host, localhost_origin=localhost_origin)
    bound = Listeners()
    try:
        for address in [*required, *extra]:
            try:
                bound.sockets.append(_bind(address, port))
            except OSError as exc:
                if address == V6_LOOPBACK and exc.errno in _NO_IPV6 and _no_ipv6():
                    bound.notes.append(
                        f"this machine has no IPv6 loopback (::1): listening on "
                        f"{shown(V4_LOOPBACK, port)} only (no other program can take "
                        f"[::1]:{port} either)"
                    )
                    continue
                if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                    raise _taken(address, port, exc) from None
                raise InboxStartError(
                    f"the inbox cannot listen on {shown(address, port)} "
                    f"({exc.strerror or exc}); pick another address with --host"
                ) from None
            bound.addresses.append(shown(address, port))
    except BaseException:
        bound.close()
        raise
    return bound


def _no_ipv6() -> bool:
    """Whether this machine has no usable IPv6 loopback (nobody can bind [::1])."""
    if not socket.has_ipv6:
        return True
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind((V6_LOOPBACK, 0))
    except OSError:
        return True
    return False


@contextlib.contextmanager
def _released(listeners: Listeners) -> Iterator[Listeners]:
    try:
        yield listeners
    finally:
        listeners.close()


def check_port(port: int) -> None:
    """Raise InboxStartError when another program listens on 127.0.0.1 or [::1] of
    `port` (`sagacity dev` asks before it starts its server; the inbox binds for real
    later)."""
    with _released(bind_listeners(V4_LOOPBACK, port, localhost_origin=True)):
        pass
