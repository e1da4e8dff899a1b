"""Discovery documents: protected-resource metadata (RFC 9728) for /mcp and the embedded
authorization server's metadata (RFC 8414), both readable cross-origin."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from mcp.server.auth.routes import cors_middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

PRM_PATH = "/.well-known/oauth-protected-resource"


def resource_metadata_url(resource: str) -> str:
    """The path-inserted PRM URL of ``resource`` (RFC 9728 §3.1); clients try it first."""
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}{PRM_PATH}{parts.path.rstrip('/')}"


def protected_resource_metadata(
    resource: str, issuers: Sequence[str], scopes: Sequence[str]
) -> dict[str, Any]:
    return {
        "resource": resource,  # exact public /mcp URL, no trailing slash
        "authorization_servers": list(issuers),  # string-equal to each AS metadata issuer
        "scopes_supported": list(scopes),  # never offline_access
        "bearer_methods_supported": ["header"],
        "resource_name": "MemoryRouter",
    }


def authorization_server_metadata(issuer: str, scopes: Sequence[str]) -> dict[str, Any]:
    return {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/token",
        "registration_endpoint": f"{issuer}/register",
        "revocation_endpoint": f"{issuer}/revoke",
        "jwks_uri": f"{issuer}/jwks.json",
        "scopes_supported": list(scopes),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        # "none" for public clients; Claude takes the metadata-document path only with it.
        "token_endpoint_auth_methods_supported": [
            "none",
            "client_secret_post",
            "client_secret_basic",
        ],
        "revocation_endpoint_auth_methods_supported": [
            "none",
            "client_secret_post",
            "client_secret_basic",
        ],
        "code_challenge_methods_supported": ["S256"],  # OAuth 2.1: no "plain"
        "client_id_metadata_document_supported": True,
        "authorization_response_iss_parameter_supported": True,  # RFC 9207
    }


def json_route(path: str, document: dict[str, Any]) -> Route:
    async def serve(_: Request) -> JSONResponse:
        return JSONResponse(document, headers={"Cache-Control": "public, max-age=3600"})

    return Route(
        path, endpoint=cors_middleware(serve, ["GET", "OPTIONS"]), methods=["GET", "OPTIONS"]
    )


def resource_routes(resource: str, issuers: Sequence[str], scopes: Sequence[str]) -> list[Route]:
    """PRM at both the root and the path-inserted URL: clients try one or the other."""
    document = protected_resource_metadata(resource, issuers, scopes)
    paths = {PRM_PATH, urlsplit(resource_metadata_url(resource)).path}
    return [json_route(path, document) for path in sorted(paths)]
