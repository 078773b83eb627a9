"""The inspector's guard: every request's Origin and token checked, every answer's security
headers set (an ASGI middleware; :func:`harnessmem.inspector.create_app` installs it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from harnessmem.access import FORGET, READ
from harnessmem.errors import AccessDenied
from harnessmem.settings.exposure import local_origin, same_secret

if TYPE_CHECKING:
    from harnessmem.access import JwtVerifier

__all__ = ["COOKIE", "CSP", "Guard"]

#: The cookie that holds the token after it came once in the URL.
COOKIE = "harnessmem_inspect"
#: The content security policy of every page: nothing but the inspector's own files.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


class Guard:
    """ASGI middleware: the token check and the security headers of every response."""

    def __init__(
        self,
        app: Callable[..., Awaitable[None]],
        token: str | None,
        names: tuple[str, ...],
        verifier: JwtVerifier | None = None,
    ) -> None:
        self.app = app
        self.token = token
        self.names = names  # on loopback: the names an Origin may carry; else empty
        self.verifier = verifier

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from starlette.requests import Request
        from starlette.responses import PlainTextResponse, RedirectResponse

        request = Request(scope)
        origin = request.headers.get("origin")
        if self.names and origin is not None and not local_origin(origin, self.names):
            # A page of another site (a rebound name, or any page posting here).
            response = PlainTextResponse(
                "403: requests from a page of another site are refused", status_code=403
            )
            await response(scope, receive, send)
            return
        if self.token is not None or self.verifier is not None:
            given = request.query_params.get("token")
            header = request.headers.get("authorization", "")
            presented = (
                given
                or (header[7:] if header.lower().startswith("bearer ") else None)
                or request.cookies.get(COOKIE)
            )
            refusal = await self._refusal(request.method, presented)
            if refusal is not None:
                status = 401 if refusal.startswith("401") else 403
                await PlainTextResponse(refusal, status_code=status)(scope, receive, send)
                return
            if given is not None:  # once in the URL, then a cookie; take it out of the URL
                redirect = RedirectResponse(request.url.remove_query_params("token"), 303)
                redirect.set_cookie(COOKIE, given, httponly=True, samesite="strict")
                await redirect(scope, receive, send)
                return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    # same-origin, not no-referrer: under no-referrer a browser sends
                    # "Origin: null" with the page's own forget form, which the Origin
                    # check above must refuse; no other site gets a referrer either way.
                    (b"referrer-policy", b"same-origin"),
                    (b"cache-control", b"no-store"),
                ]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)

    async def _refusal(self, method: str, presented: str | None) -> str | None:
        """Why a request presenting ``presented`` is refused (``401: ...``, ``403: ...``),
        or ``None``: it is the token, or a JWT granting what ``method`` does (a POST
        forgets or edits)."""
        if presented is None:
            return "401: a valid token is required"
        if self.token is not None and same_secret(presented, self.token):
            return None
        if self.verifier is None:
            return "401: a valid token is required"
        import anyio.to_thread

        try:
            grant = await anyio.to_thread.run_sync(self.verifier.verify, presented)
            grant.require(FORGET if method == "POST" else READ, "this page")
        except AccessDenied as exc:
            refused = exc.message.startswith("bearer token refused")
            return "401: a valid token is required" if refused else f"403: {exc.message}"
        return None
