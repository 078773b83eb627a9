"""Which addresses harnessmem may serve on without a token: the one rule for the inspector's
page and the MCP server's HTTP transport.

A loopback address (``localhost``, 127.0.0.0/8, ``::1``, also written ``[::1]``) is reachable
from this machine only; any other address, and any host name (it may resolve to anything),
shows memory to the network, so serving there needs a token.

A loopback address is no shelter from the browser: a web page on a domain whose DNS answer
switches to 127.0.0.1 (DNS rebinding) can send requests there, and any page can post to it.
Its requests name the page's own site in ``Host`` and ``Origin``, so a server on loopback
answers only the names it was bound with (:func:`loopback_names`); tokens are compared with
:func:`same_secret`, which takes any text a request brings.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket

from harnessmem.errors import ConfigError

__all__ = [
    "check_exposure",
    "is_loopback",
    "listen",
    "local_origin",
    "loopback_names",
    "same_secret",
    "url_host",
]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address, bracketed or not, or ``localhost``) names this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def loopback_names(host: str) -> tuple[str, ...]:
    """The names a server bound to loopback ``host`` answers, as a ``Host`` header writes
    them without the port (an IPv6 address in brackets); empty when ``host`` is not loopback.

    Each address is its own name, as given and in its short form (``127.0.0.2``,
    ``[::1]``); ``localhost`` goes with ``127.0.0.1`` and ``::1``, the addresses it
    resolves to, and they with it. A host name a page's DNS may point anywhere is never
    one of them.
    """
    if not is_loopback(host):
        return ()
    bare = host.removeprefix("[").removesuffix("]")
    if bare == "localhost":
        return ("localhost", "127.0.0.1", "[::1]")
    address = ipaddress.ip_address(bare)
    names = dict.fromkeys([url_host(str(address)), url_host(bare)])
    if str(address) in ("127.0.0.1", "::1"):
        names["localhost"] = None
    return tuple(names)


def local_origin(origin: str, names: tuple[str, ...]) -> bool:
    """Whether the ``Origin`` header ``origin`` is ``http://`` one of ``names`` (with or
    without a port): a page served from this very server, not from another site."""
    scheme, sep, rest = origin.partition("://")
    if scheme.lower() != "http" or not sep:
        return False  # "null" (a sandboxed frame, a file), https:// (not this server), ...
    if rest.startswith("["):
        name, _, port = rest.partition("]")
        name, port = name + "]", port.removeprefix(":")
    else:
        name, _, port = rest.partition(":")
    return name.lower() in names and (port == "" or port.isdigit())


def same_secret(given: str, secret: str) -> bool:
    """Whether ``given`` is ``secret``, compared in constant time.

    Any text is compared, never refused: ``hmac.compare_digest`` raises on ``str`` beyond
    ASCII, and a header (read as Latin-1), a query or a form field may hold anything.
    """
    return hmac.compare_digest(
        given.encode("utf-8", "surrogatepass"), secret.encode("utf-8", "surrogatepass")
    )


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
