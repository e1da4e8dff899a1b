"""The vault's HTTP boundary: the ``/v1`` routes, the error envelope, the body limit, the
per-key rate limit, which key a request presents, and domain records rendered as the wire
models of ``schemas.py``."""
