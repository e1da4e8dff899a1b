"""The provider routes the chat proxy serves, and those it answers with a 404 that names
them (an app that points its whole client here finds out at its first such call)."""

from __future__ import annotations

SERVED = (
    "POST /v1/chat/completions",
    "POST /v1/responses",
    "POST /v1/messages",
    "POST /{v1,v1beta,v1alpha}/models/{model}:generateContent and :streamGenerateContent",
    "POST /v1/embeddings, POST /v1/messages/count_tokens and GET /v1/models (passed on "
    "without memory)",
)
NOT_SERVED = (
    "/v1/completions",
    "/v1/messages/{rest:path}",
    "/v1/responses/{rest:path}",
    "/v1/chat/completions/{rest:path}",
    *(
        f"/v1/{name}" + suffix
        for name in (
            "audio",
            "images",
            "files",
            "uploads",
            "batches",
            "moderations",
            "fine_tuning",
            "assistants",
            "threads",
            "vector_stores",
            "realtime",
            "conversations",
            "containers",
            "evals",
            "complete",
        )
        for suffix in ("", "/{rest:path}")
    ),
)
