"""The consent page's form: what an app asks for, in words; what it asks for that the person
has not allowed it before (a step-up: "… now asks to delete memories"); and the answers.

Pure HTML from what the pages know: every scope the app asked for is ticked (the person
unticks what they refuse), a scope the memory key cannot grant is shown but cannot be ticked,
and Allow is the form's first button, so Enter allows.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from html import escape
from typing import cast

from mcp_memoryrouter.auth.scopes import SCOPE_WORDS, Scope


@dataclass(frozen=True)
class Asked:
    """One scope the app asked for, as the page shows it."""

    scope: str
    words: str  # "Delete memories"
    detail: str  # scopes.yaml's description
    possible: bool  # the signed-in key may grant it
    new: bool  # a step-up: not granted to this app in this vault before


def asked(
    requested: Sequence[str],
    possible: Collection[str],
    granted_before: Collection[str],
    descriptions: dict[Scope, str],
) -> list[Asked]:
    """The scopes of a request, in the order the app named them. Nothing is new at a first
    connection (nothing was granted before): the whole page is the request then."""
    step_up = bool(granted_before)
    return [
        Asked(
            scope,
            SCOPE_WORDS.get(cast(Scope, scope), scope),
            descriptions.get(cast(Scope, scope), ""),
            scope in possible,
            step_up and scope not in granted_before,
        )
        for scope in requested
    ]


def in_a_sentence(words: Sequence[str]) -> str:
    """``["Read your memories", "Delete memories"]`` as "read your memories and delete
    memories"."""
    lowered = [w[:1].lower() + w[1:] for w in words]
    if len(lowered) < 2:
        return "".join(lowered)
    return ", ".join(lowered[:-1]) + " and " + lowered[-1]


def news(client: str, scopes: Sequence[Asked]) -> str:
    """The notice above a step-up's form: what the app ``client`` (HTML) now asks for, and
    what to do when the key cannot allow it."""
    new = [a for a in scopes if a.new]
    if not new:
        return ""
    sentence = escape(in_a_sentence([a.words for a in new]))
    said = f"{client} now asks to <strong>{sentence}</strong>."
    if not all(a.possible for a in new):
        said += (
            " The memory key you signed in with cannot allow that: use another memory key "
            "(one that is not read-only), or deny."
        )
    return f'<p class="suggestion" role="status">{said}</p>'


def checkbox(one: Asked) -> str:
    ident = escape("scope-" + one.scope.replace(":", "-"))
    detail = f"{ident}-detail"
    tags = '<span class="tag new">new request</span>' if one.new else ""
    if not one.possible:
        tags += '<span class="tag">not possible with this key</span>'
    control = (
        f'<input type="checkbox" id="{ident}" name="scope" value="{escape(one.scope)}" '
        f'checked aria-describedby="{detail}">'
        if one.possible
        else f'<input type="checkbox" id="{ident}" disabled aria-describedby="{detail}">'
    )
    marked = ' class="new"' if one.new else ""
    return (
        f"<li{marked}>{control}"
        f'<label for="{ident}">{escape(one.words)} {tags}</label>'
        f'<p class="note" id="{detail}">{escape(one.detail)}</p></li>'
    )


def answers(
    action: str, csrf: str, scopes: Sequence[Asked], returns_to: str, client_id: str
) -> str:
    """The form posted to ``action``: the scopes, where the browser goes next, Allow (the
    first and main button), Deny, and another key. ``returns_to`` and ``client_id`` are HTML
    already."""
    boxes = "".join(checkbox(a) for a in scopes)
    return (
        f'<form method="post" action="{escape(action)}" class="consent">'
        f'<input type="hidden" name="csrf" value="{escape(csrf)}">'
        f'<fieldset><legend>Allow this app to</legend><ul class="scopes">{boxes}</ul>'
        "</fieldset>"
        f"<p>After you choose, you go back to <strong>{returns_to}</strong>.</p>"
        '<p class="actions"><button type="submit" name="decision" value="allow">Allow</button>'
        '<button type="submit" name="decision" value="deny" class="secondary">Deny</button></p>'
        f'<p class="note">Client id: <code>{client_id}</code></p>'
        '<p class="note">Signed in with the wrong vault? <button type="submit" '
        'name="decision" value="switch" class="link">Use another memory key</button></p>'
        "</form>"
    )
