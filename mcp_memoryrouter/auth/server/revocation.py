"""Token revocation (RFC 7009) for public clients too.

The SDK's handler requires a ``client_secret`` field even for clients registered with
``token_endpoint_auth_method=none``; this one authenticates the client the same way and
needs only ``token``.
"""

from __future__ import annotations

from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mcp_memoryrouter.auth.server.provider import EmbeddedProvider

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


class RevocationEndpoint:
    def __init__(self, provider: EmbeddedProvider, authenticator: ClientAuthenticator) -> None:
        self._provider = provider
        self._authenticator = authenticator

    async def handle(self, request: Request) -> Response:
        try:
            client = await self._authenticator.authenticate_request(request)
        except AuthenticationError as exc:
            body = {"error": "invalid_client", "error_description": exc.message}
            return JSONResponse(body, status_code=401, headers=NO_STORE)
        token = (await request.form()).get("token")
        if not isinstance(token, str) or not token:
            body = {"error": "invalid_request", "error_description": "token is required"}
            return JSONResponse(body, status_code=400, headers=NO_STORE)
        found = await self._provider.load_access_token(token) or (
            await self._provider.load_refresh_token(client, token)
        )
        # RFC 7009 §2.2: unknown tokens, and other clients' tokens, are answered 200 as well
        if found is not None and found.client_id == client.client_id:
            await self._provider.revoke_token(found)
        return Response(status_code=200, headers=NO_STORE)
