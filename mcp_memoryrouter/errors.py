"""One exception tree for the whole package.

Every error knows its HTTP status and a stable machine code; the REST boundary renders
each one as ``{"error": {"code", "message", "details"}}`` and nothing else.

    MemoryRouterError
    ├── InvalidRequest      400  invalid_request     bad fields, tiers, importance, dates, entries
    ├── Unauthorized        401  unauthorized        missing or unknown memory key
    ├── Forbidden           403  forbidden           read-only key on a write, key mode forbids it
    │   └── ProxiedRequest  403  proxied_request     a server without keys reached through a proxy
    ├── NotFound            404  not_found           unknown id or batch (ids of other vaults too)
    ├── LeaseExpired        409  lease_expired       commit after the batch lease ran out
    ├── Conflict            409  conflict            the vault's state refuses the change
    ├── RequestTimeout      408  request_timeout     a request body that did not arrive in time
    ├── PayloadTooLarge     413  payload_too_large   request body above the limit
    ├── UnsupportedMedia    415  unsupported_media_type  a body that is not JSON where JSON is read
    ├── RateLimited         429  rate_limited        too many requests for one key
    ├── StoreUnavailable    503  store_unavailable   the database cannot answer right now
    ├── TransportFailure    502  transport_failure   the client could not reach the vault
    ├── ModelFailure        502  model_failure       the model gave no answer at all
    └── InvalidAnswer       422  invalid_answer      the answer breaks the reflection contract

A server that must not start raises a :class:`StartupError` instead, whose message says what
to change; the command line prints it, and it never reaches a caller over HTTP:

    StartupError
    ├── ConfigError         the settings describe a server that must not start
    ├── PolicyError         scopes.yaml and the tool catalog disagree (auth/scopes.py)
    ├── BindingsError       the OAuth bindings file is unreadable or open (auth/resource/)
    └── StoreInUse          another process serves this SQLite vault (store/sqlite/owner.py)
"""

from __future__ import annotations

from typing import Any, ClassVar


class StartupError(Exception):
    """Raised while a server is assembled, when it must not start."""


class ConfigError(StartupError):
    """The settings describe a server that must not start."""


class MemoryRouterError(Exception):
    """Base class: raised for any failure the package reports to a caller."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details or {}

    def envelope(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


class Misdirected(MemoryRouterError):
    """421: the request names (in ``Host``) a server this one is not known as."""

    status = 421
    code = "misdirected_request"


class InvalidRequest(MemoryRouterError):
    """Raised when a request body or parameter breaks a documented rule."""

    status = 400
    code = "invalid_request"


class Unauthorized(MemoryRouterError):
    """Raised when no memory key is presented, or the key is unknown."""

    status = 401
    code = "unauthorized"


class Forbidden(MemoryRouterError):
    """Raised when the key is valid but may not do this (read-only key, key mode)."""

    status = 403
    code = "forbidden"


class ProxiedRequest(Forbidden):
    """Raised when a server without keys (``MEMORYROUTER_AUTH=none``) is reached through a
    proxy, or from another machine (forwarding.py)."""

    code = "proxied_request"


class NotFound(MemoryRouterError):
    """Raised for an unknown memory id or batch id, including ids of other vaults."""

    status = 404
    code = "not_found"


class LeaseExpired(MemoryRouterError):
    """Raised when a batch is committed after its lease expired."""

    status = 409
    code = "lease_expired"


class Conflict(MemoryRouterError):
    """Raised when a change is refused by the vault's state: it would leave no read-write
    key, or an archive with lineage meets a vault that is not empty."""

    status = 409
    code = "conflict"


class PayloadTooLarge(MemoryRouterError):
    """Raised when a request body exceeds the configured limit."""

    status = 413
    code = "payload_too_large"


class RequestTimeout(MemoryRouterError):
    """Raised when a request body does not arrive whole within its deadline."""

    status = 408
    code = "request_timeout"


class UnsupportedMedia(MemoryRouterError):
    """Raised when a body is sent as something other than JSON where only JSON is read."""

    status = 415
    code = "unsupported_media_type"


def too_large(max_bytes: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"request body exceeds {max_bytes} bytes", {"max_bytes": max_bytes})


class RateLimited(MemoryRouterError):
    """Raised when one key sends more requests than its budget allows."""

    status = 429
    code = "rate_limited"


class StoreUnavailable(MemoryRouterError):
    """Raised when the store cannot serve the request (locked, disk, connection)."""

    status = 503
    code = "store_unavailable"


class TransportFailure(MemoryRouterError):
    """Raised by the HTTP client when the vault cannot be reached at all."""

    status = 502
    code = "transport_failure"


class ModelFailure(MemoryRouterError):
    """Raised when the model command or endpoint fails, times out or answers no text."""

    status = 502
    code = "model_failure"


class InvalidAnswer(MemoryRouterError):
    """Raised when the model's answer holds no entries the reflection contract accepts."""

    status = 422
    code = "invalid_answer"


_BY_CODE: dict[str, type[MemoryRouterError]] = {
    cls.code: cls
    for cls in (
        Misdirected,
        InvalidRequest,
        Unauthorized,
        Forbidden,
        ProxiedRequest,
        NotFound,
        LeaseExpired,
        Conflict,
        RequestTimeout,
        PayloadTooLarge,
        UnsupportedMedia,
        RateLimited,
        StoreUnavailable,
        TransportFailure,
    )
}


def error_for(code: str, message: str, details: dict[str, Any] | None = None) -> MemoryRouterError:
    """Rebuild the exception a REST envelope describes (used by the HTTP client)."""
    cls = _BY_CODE.get(code, MemoryRouterError)
    return cls(message, details)
