"""A deadline for a whole provider call, not for each read.

The SDKs' timeouts (httpx's) bound each socket operation: a provider that sends a byte a second
never trips them, and one call can last minutes. Here every read, write and connect of the SDK's
connections is given only the time left before the calling thread's deadline, so the call ends
with a timeout at its deadline, however the provider trickles. The SDK's own client is kept (its
limits, proxies and socket options); only its connections' network backend is wrapped.
"""

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore2

_local = threading.local()


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Within this block, this thread's network operations on wrapped clients end `seconds` from now."""
    _local.at = time.monotonic() + seconds
    try:
        yield
    finally:
        _local.at = None


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    at = getattr(_local, "at", None)
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise error("the call's deadline has passed")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore2.NetworkStream):
    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> "_Stream":
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, _left(timeout, httpcore2.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore2.NetworkBackend):
    def __init__(self, inner: httpcore2.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> _Stream:
        timeout = _left(timeout, httpcore2.ConnectTimeout)
        return _Stream(self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> _Stream:
        timeout = _left(timeout, httpcore2.ConnectTimeout)
        return _Stream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def bound_by_deadline(http_client: Any) -> Any:
    """Wrap the network backend of every connection pool of an httpx2 client (SDK default client).

    httpx2 takes no network backend of its own, so this reaches into its transports' pools; a
    release that renames them fails here, loudly, and the trickle tests guard the behaviour.
    """
    transports = [http_client._transport, *(t for t in http_client._mounts.values() if t is not None)]
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        if pool is None or not hasattr(pool, "_network_backend"):
            raise RuntimeError(f"cannot bound {type(transport).__name__} by a deadline: unknown httpx2 internals")
        if not isinstance(pool._network_backend, _Backend):
            pool._network_backend = _Backend(pool._network_backend)
    return http_client
