"""The access log without secrets: uvicorn writes each request's path with its query string,
and some clients put a secret there (Google's clients send their API key as ``?key=``, an
identity provider returns its code as ``?code=``). Their values are replaced before the line
is written; the parameter's name stays, so the line still says what was sent."""

from __future__ import annotations

import logging
from urllib.parse import unquote_plus

ACCESS_LOGGER = "uvicorn.access"
REDACTED = "[redacted]"
# query parameters whose value is a credential, compared in lower case
SECRET_PARAMETERS = frozenset(
    {
        "key",
        "api_key",
        "apikey",
        "x-goog-api-key",
        "access_token",
        "id_token",
        "refresh_token",
        "token",
        "code",
        "client_secret",
        "password",
    }
)


def redacted(target: str) -> str:
    """``target`` (a path with its query) with each secret parameter's value replaced."""
    path, mark, query = target.partition("?")
    if not mark:
        return target
    kept = []
    for part in query.split("&"):
        name, equals, _ = part.partition("=")
        secret = unquote_plus(name).strip().lower() in SECRET_PARAMETERS
        kept.append(f"{name}={REDACTED}" if secret and equals else part)
    return f"{path}?{'&'.join(kept)}"


class SecretsOut(logging.Filter):
    """Rewrites uvicorn's access line (``client - "METHOD target HTTP/x" status``), whose
    third argument is the target."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], redacted(args[2]), *args[3:])
        return True


def keep_secrets_out_of_the_access_log() -> None:
    """Install the filter on uvicorn's access logger (once)."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, SecretsOut) for f in logger.filters):
        logger.addFilter(SecretsOut())
