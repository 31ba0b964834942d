"""A TCP proxy that a fault test can cut, black-hole and restore.

It sits between a client (a worker, a journal store) and a server (PostgreSQL), listening
on 127.0.0.1 only. Threads, not asyncio: the proxy must keep forwarding (or refusing)
while the test's event loop is blocked in a synchronous call, and it must not share fate
with the code under test.

Modes:
- "up": forward bytes both ways.
- "down": every live connection is reset (RST, not a polite FIN) and every new one is
  accepted and reset at once, so a client sees "connection refused/reset" immediately.
  Accepting-then-resetting instead of closing the listener keeps the port ours and lets
  the test count the attempts: proof that the client tried and failed.
- "blackhole": new connections are accepted and held without an answer (a firewall that
  drops packets); nothing is forwarded.

Counters (`stats()`) are the evidence a test asserts on: connections forwarded, live
connections dropped by a cut, attempts refused while down, connections black-holed.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

_RST = struct.pack("ii", 1, 0)  # SO_LINGER on, timeout 0: close() sends RST


@dataclass(frozen=True)
class ProxyStats:
    forwarded: int
    dropped: int
    refused: int
    blackholed: int
    live: int


def _reset(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RST)
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


class TcpProxy:
    """127.0.0.1:<port> → target. Use as a context manager or call start()/close()."""

    def __init__(self, target_host: str, target_port: int, *, listen_port: int = 0) -> None:
        self.target = (target_host, target_port)
        self._listen_port = listen_port
        self._lock = threading.Lock()
        self._mode = "up"
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._held: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._listener: socket.socket | None = None
        self._closed = threading.Event()
        self._forwarded = self._dropped = self._refused = self._blackholed = 0
        self.port = 0

    # ---- lifecycle ---------------------------------------------------------------------

    def start(self) -> TcpProxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self._listen_port))
        listener.listen(128)
        listener.settimeout(0.2)
        self._listener = listener
        self.port = int(listener.getsockname()[1])
        self._spawn(self._accept_loop, "proxy-accept")
        return self

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            pairs, self._pairs = self._pairs, []
            held, self._held = self._held, []
        for a, b in pairs:
            _reset(a)
            _reset(b)
        for sock in held:
            _reset(sock)
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- faults ------------------------------------------------------------------------

    def cut(self) -> int:
        """Reset every live connection and refuse new ones; returns how many were cut."""
        return self._switch("down")

    def blackhole(self) -> int:
        """Reset live connections; accept new ones and never answer them."""
        return self._switch("blackhole")

    def restore(self) -> None:
        with self._lock:
            self._mode = "up"
            held, self._held = self._held, []
        for sock in held:
            _reset(sock)

    def stats(self) -> ProxyStats:
        with self._lock:
            return ProxyStats(
                forwarded=self._forwarded,
                dropped=self._dropped,
                refused=self._refused,
                blackholed=self._blackholed,
                live=len(self._pairs),
            )

    @property
    def mode(self) -> str:
        return self._mode

    def _switch(self, mode: str) -> int:
        with self._lock:
            self._mode = mode
            pairs, self._pairs = self._pairs, []
            self._dropped += len(pairs)
        for client, upstream in pairs:
            _reset(client)
            _reset(upstream)
        return len(pairs)

    # ---- plumbing ----------------------------------------------------------------------

    def _spawn(self, target: object, name: str, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)  # type: ignore[arg-type]
        self._threads = [t for t in self._threads if t.is_alive()]
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            with self._lock:
                mode = self._mode
                if mode == "down":
                    self._refused += 1
                elif mode == "blackhole":
                    self._blackholed += 1
                    self._held.append(client)
            if mode == "down":
                _reset(client)
            elif mode == "up":
                self._connect(client)

    def _connect(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=5)
            upstream.settimeout(None)
        except OSError:
            _reset(client)
            return
        for sock in (client, upstream):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            if self._mode != "up":  # cut while we were connecting
                self._refused += 1
                _reset(client)
                _reset(upstream)
                return
            self._forwarded += 1
            self._pairs.append((client, upstream))
        self._spawn(self._pump, "proxy-pump", client, upstream)
        self._spawn(self._pump, "proxy-pump", upstream, client)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        with self._lock:
            pair = next(
                (p for p in self._pairs if src in p and dst in p),
                None,
            )
            if pair is not None:
                self._pairs.remove(pair)
        # One side ended: end both, so the other pump thread wakes up too.
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


def target_of(url: str) -> tuple[str, int]:
    """(host, port) a postgresql:// URL points at."""
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 5432


def through(url: str, proxy: TcpProxy) -> str:
    """`url` with its host and port replaced by the proxy's (user, database and query
    parameters such as the journal schema are kept)."""
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@127.0.0.1:{proxy.port}" if userinfo else f"127.0.0.1:{proxy.port}"
    return urlunsplit(parts._replace(netloc=netloc))
