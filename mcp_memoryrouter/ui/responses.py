"""What every handler of the explorer answers with: a page, a redirect after a change, the
viewer a page is made for, and the one rule for following an address the browser sent."""

from __future__ import annotations

from starlette.responses import HTMLResponse, RedirectResponse, Response

from mcp_memoryrouter.ui.render import PREFIX, Viewer
from mcp_memoryrouter.ui.sessions import UiSession

Form = dict[str, list[str]]


def html(content: str, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return HTMLResponse(content, status_code=status, headers=headers)


def redirect(target: str) -> Response:
    return RedirectResponse(target, status_code=303)


def local_path(value: str | None, default: str = PREFIX) -> str:
    """``value`` when it is a path of the explorer (never another site), else ``default``."""
    if value and value.startswith(PREFIX) and not value.startswith("//") and "\\" not in value:
        rest = value[len(PREFIX) :]
        if rest == "" or rest.startswith(("/", "?")):
            return value
    return default


def viewer_of(session: UiSession) -> Viewer:
    return Viewer(session.vault_ref, session.read_only, session.csrf)


def field(form: Form, name: str) -> str:
    """The form's first value for ``name`` ("" when absent)."""
    return (form.get(name) or [""])[0]


def count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"
