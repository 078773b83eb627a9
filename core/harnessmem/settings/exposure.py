"""Which addresses harnessmem may serve on without a token: the one rule for the inspector's
page and the MCP server's HTTP transport.

A loopback address (``localhost``, 127.0.0.0/8, ``::1``, also written ``[::1]``) is reachable
from this machine only; any other address, and any host name (it may resolve to anything),
shows memory to the network, so serving there needs a token.
"""

from __future__ import annotations

import ipaddress
import socket

from harnessmem.errors import ConfigError

__all__ = ["check_exposure", "is_loopback", "listen", "url_host"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address, bracketed or not, or ``localhost``) names this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def check_exposure(host: str, token: str | None, *, refusal: str, hint: str) -> None:
    """``ConfigError(refusal, hint)`` when ``host`` is not loopback and there is no token."""
    if not token and not is_loopback(host):
        raise ConfigError(refusal, hint=hint)


def url_host(host: str) -> str:
    """``host`` as a URL writes it (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host


def listen(host: str, port: int) -> tuple[socket.socket, int]:
    """A socket listening on ``host:port`` before any server runs on it, and its real port
    (port 0 picks a free one): the URL can be told at once, and a client that connects
    before the server is up waits in the backlog. ``ConfigError`` when it cannot listen."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {url_host(host)}:{port}: {exc.strerror or exc}",
            hint="pick another port, or stop the process that holds this one",
        ) from exc
    return sock, sock.getsockname()[1]
