"""Which addresses harnessmem may serve on without a token: the one rule for the inspector's
page and the MCP server's HTTP transport.

A loopback address (``localhost``, 127.0.0.0/8, ``::1``, also written ``[::1]``) is reachable
from this machine only; any other address, and any host name (it may resolve to anything),
shows memory to the network, so serving there needs a token.
"""

from __future__ import annotations

import ipaddress

from harnessmem.errors import ConfigError

__all__ = ["check_exposure", "is_loopback"]


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
