"""The explorer's sessions and refusals over real HTTP: cookies, CSRF, expiry, revocation,
headers on every page, the sign-in's own protections, and MEMORYROUTER_UI=off."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from mcp_memoryrouter import limits
from mcp_memoryrouter.pages.headers import EXPLORER_CSP as CSP
from mcp_memoryrouter.ui.sessions import IDLE_SECONDS, LIFETIME_SECONDS, UI_DB_FILE
from tests.support.oauth import OAuthServer, oauth_server_at
from tests.support.ui import CSRF, api, csrf_of, signed_in, stats


@pytest.fixture
def browser(server: OAuthServer) -> Iterator[httpx2.Client]:
    with signed_in(server, server.key) as made:
        yield made


def test_pages_need_a_session_and_come_back_after_sign_in(server: OAuthServer) -> None:
    with httpx2.Client(base_url=server.base, timeout=30) as anonymous:
        answer = anonymous.get("/ui/search?q=x", follow_redirects=False)
        assert answer.status_code == 303
        assert answer.headers["location"] == "/ui/sign-in?next=%2Fui%2Fsearch%3Fq%3Dx"
        form = anonymous.get(answer.headers["location"])
        token = CSRF.search(form.text)
        assert token
        signed = anonymous.post(
            "/ui/sign-in",
            data={"csrf": token.group(1), "key": server.key, "next": "/ui/search?q=x"},
            follow_redirects=False,
        )
        assert signed.headers["location"] == "/ui/search?q=x"


def test_the_session_cookie_is_httponly_strict_and_holds_no_key(server: OAuthServer) -> None:
    with httpx2.Client(base_url=server.base, timeout=30) as browser:
        token = CSRF.search(browser.get("/ui/sign-in").text)
        assert token
        answer = browser.post("/ui/sign-in", data={"csrf": token.group(1), "key": server.key})
    cookie = next(
        v for v in answer.headers.get_list("set-cookie") if v.startswith("memoryrouter_ui=")
    )
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
    assert server.key not in cookie
    assert server.key not in answer.headers["location"]


def test_every_page_is_unframeable_under_a_strict_policy(
    server: OAuthServer, browser: httpx2.Client
) -> None:
    for path in ("/ui", "/ui/search", "/ui/timeline", "/ui/tidy", "/ui/static/explorer.css"):
        answer = browser.get(path)
        assert answer.status_code == 200, path
        assert answer.headers["content-security-policy"] == CSP
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["x-content-type-options"] == "nosniff"
    assert "'unsafe-inline'" not in CSP and "frame-ancestors 'none'" in CSP
    with httpx2.Client(base_url=server.base) as anonymous:
        assert anonymous.get("/ui/sign-in").headers["content-security-policy"] == CSP


def test_a_change_without_its_csrf_token_is_refused_and_changes_nothing(
    server: OAuthServer, browser: httpx2.Client
) -> None:
    api(server, "POST", "/v1/memory/ingest", server.key, messages=[{"content": "keep me"}])
    vault = server.vault_of(server.key)
    for data in ({"confirm": vault}, {"confirm": vault, "csrf": "guessed"}):
        answer = browser.post("/ui/wipe", data=data)
        assert answer.status_code == 403
        assert "Load the page again" in answer.text
    assert stats(server, server.key)["total_memories"] == 1
    answer = browser.post("/ui/wipe", data={"confirm": vault, "csrf": csrf_of(browser)})
    assert answer.status_code == 303
    assert stats(server, server.key)["total_memories"] == 0


def test_the_sign_in_form_needs_its_own_token(server: OAuthServer) -> None:
    """A page elsewhere cannot sign a browser in to its own vault (login CSRF)."""
    with httpx2.Client(base_url=server.base, timeout=30) as fresh:
        answer = fresh.post("/ui/sign-in", data={"csrf": "x", "key": server.key})
        assert answer.status_code == 403
        assert "memoryrouter_ui=" not in answer.headers.get("set-cookie", "")


def test_an_idle_or_old_session_ends_and_says_so(server: OAuthServer) -> None:
    with signed_in(server, server.key) as browser:
        server.clock.advance(IDLE_SECONDS - 120)
        assert browser.get("/ui").status_code == 200  # still in use: the idle clock restarts
        server.clock.advance(IDLE_SECONDS - 120)
        assert browser.get("/ui").status_code == 200
        server.clock.advance(IDLE_SECONDS + 1)
        answer = browser.get("/ui")
        assert answer.status_code == 303 and "/ui/sign-in" in answer.headers["location"]
        # a change sent after the end is refused too, and says to sign in again
        refused = browser.post("/ui/wipe", data={"confirm": "x", "csrf": "x"})
        assert refused.status_code == 401
        assert "Sign in again" in refused.text
    with signed_in(server, server.key) as browser:
        for _ in range(int(LIFETIME_SECONDS / (IDLE_SECONDS - 60)) + 1):
            server.clock.advance(IDLE_SECONDS - 60)
            if browser.get("/ui").status_code != 200:
                break
        else:
            raise AssertionError("a session in constant use outlived its lifetime")


def test_revoking_the_key_ends_its_sessions(server: OAuthServer) -> None:
    second = api(server, "POST", "/v1/keys", server.key, name="laptop")
    with signed_in(server, second["key"]) as browser:
        assert browser.get("/ui").status_code == 200
        api(server, "DELETE", f"/v1/keys/{second['id']}", server.key)
        answer = browser.get("/ui")
        assert answer.status_code == 303
        assert answer.headers["location"] == "/ui/sign-in?next=%2Fui&ended=1"
        assert "Sign in again" in browser.get("/ui/sign-in?ended=1").text


def test_sign_out_ends_the_session_on_the_server(
    server: OAuthServer, browser: httpx2.Client
) -> None:
    cookie = browser.cookies["memoryrouter_ui"]
    answer = browser.post("/ui/sign-out", data={"csrf": csrf_of(browser)})
    assert answer.status_code == 303
    with httpx2.Client(base_url=server.base, cookies={"memoryrouter_ui": cookie}) as replay:
        assert replay.get("/ui", follow_redirects=False).status_code == 303


def test_next_never_leaves_the_explorer(server: OAuthServer) -> None:
    for target in ("https://evil.example/", "//evil.example/ui", "/v1/memory/export", "/uix"):
        with httpx2.Client(base_url=server.base, timeout=30) as fresh:
            token = CSRF.search(fresh.get("/ui/sign-in").text)
            assert token
            answer = fresh.post(
                "/ui/sign-in", data={"csrf": token.group(1), "key": server.key, "next": target}
            )
            assert answer.headers["location"] == "/ui", target


def test_an_oversized_form_is_refused(server: OAuthServer, browser: httpx2.Client) -> None:
    answer = browser.post("/ui/delete", data={"csrf": csrf_of(browser), "ids": "x" * 70_000})
    assert answer.status_code == 413


def test_a_missing_memory_is_a_404_page(browser: httpx2.Client) -> None:
    answer = browser.get("/ui/memories/00000000-0000-4000-8000-000000000000")
    assert answer.status_code == 404
    assert "may have been deleted" in answer.text


@pytest.mark.own_server  # reads the data directory
def test_the_sessions_file_is_private(server: OAuthServer, tmp_path: Path) -> None:
    with signed_in(server, server.key):
        pass
    mode = stat.S_IMODE(os.stat(tmp_path / UI_DB_FILE).st_mode)
    assert mode == 0o600
    assert server.key.encode() not in (tmp_path / UI_DB_FILE).read_bytes()


def test_ui_off_removes_the_pages(tmp_path: Path) -> None:
    with oauth_server_at(tmp_path, ui="off") as server:
        assert httpx2.get(server.base + "/ui/sign-in").status_code == 404


def test_a_local_server_without_keys_opens_its_vault_with_one_button(tmp_path: Path) -> None:
    with (
        oauth_server_at(tmp_path, auth="none") as server,
        httpx2.Client(base_url=server.base, timeout=30) as browser,
    ):
        form = browser.get("/ui/sign-in")
        assert 'name="key"' not in form.text and "Open the vault" in form.text
        token = CSRF.search(form.text)
        assert token
        browser.post("/ui/sign-in", data={"csrf": token.group(1)})
        assert browser.get("/ui").status_code == 200


def test_sign_in_attempts_are_limited_per_address(server: OAuthServer) -> None:
    with httpx2.Client(base_url=server.base, timeout=30) as guesser:
        token = CSRF.search(guesser.get("/ui/sign-in").text)
        assert token
        statuses = [
            guesser.post("/ui/sign-in", data={"csrf": token.group(1), "key": f"mk_guess{i}"})
            for i in range(limits.UI_SIGN_INS_PER_MINUTE + 1)
        ]
    assert [s.status_code for s in statuses[:-1]] == [401] * limits.UI_SIGN_INS_PER_MINUTE
    assert statuses[-1].status_code == 429
    assert int(statuses[-1].headers["retry-after"]) >= 1
    assert "Too many sign-in attempts" in statuses[-1].text


def test_another_host_name_gets_nothing_dns_rebinding(server: OAuthServer) -> None:
    """A page on another name that resolves to this server cannot use the explorer, even a
    local one without keys."""
    forged = {"Host": "attacker.example:8787"}
    with httpx2.Client(base_url=server.base, timeout=30) as browser:
        for path in ("/ui", "/ui/sign-in", "/ui/export", "/ui/static/explorer.css"):
            answer = browser.get(path, headers=forged)
            assert answer.status_code == 421, path
            assert "MEMORYROUTER_ALLOWED_HOSTS" in answer.text
            assert answer.headers["content-security-policy"] == CSP


def test_a_post_from_another_origin_is_refused(server: OAuthServer, browser: httpx2.Client) -> None:
    api(server, "POST", "/v1/memory/ingest", server.key, messages=[{"content": "keep me"}])
    answer = browser.post(
        "/ui/wipe",
        data={"confirm": server.vault_of(server.key), "csrf": csrf_of(browser)},
        headers={"Origin": "https://evil.example"},
    )
    assert answer.status_code == 403
    assert stats(server, server.key)["total_memories"] == 1


def test_every_answer_under_ui_carries_the_headers(browser: httpx2.Client) -> None:
    for method, path, status in (
        ("GET", "/ui/nonexistent", 404),
        ("GET", "/ui/memories/a%2Fb", 404),
        ("POST", "/ui/search", 405),
        ("GET", "/ui/", 303),
    ):
        answer = browser.request(method, path)
        assert answer.status_code == status, (path, answer.status_code)
        assert answer.headers["content-security-policy"] == CSP, path
        assert answer.headers["x-frame-options"] == "DENY", path


def test_odd_input_gets_a_page_that_says_so_never_a_500(
    server: OAuthServer, browser: httpx2.Client
) -> None:
    for path in (
        "/ui/search?importance=%C2%B2",
        "/ui/search?importance=" + "9" * 5000,
        "/ui/search?importance=0",
        "/ui/search?from=May",
        "/ui/timeline?cursor=garbage",
        "/ui/memories/" + "x" * 201,
        "/ui/memories/00000000-0000-4000-8000-000000000000?offset=-5",
    ):
        answer = browser.get(path)
        assert 400 <= answer.status_code < 500, (path[:60], answer.status_code)
        assert 'role="alert"' in answer.text, path[:60]
    token = csrf_of(browser)
    for form in (
        {"ids": "y" * 300},
        {"ids": [f"id-{i}" for i in range(501)]},
        {"ids": ""},
    ):
        answer = browser.post("/ui/delete", data={"csrf": token, **form})
        assert answer.status_code == 400, form.keys()
    answer = browser.post("/ui/keys", data={"csrf": token, "name": "n" * 300})
    assert answer.status_code == 400


def test_a_notice_comes_from_the_server_never_from_the_url(browser: httpx2.Client) -> None:
    page = browser.get("/ui?done=wiped:123456&notice=Wiped")
    assert "123456" not in page.text and 'role="status"' not in page.text


def test_a_second_tab_keeps_its_sign_in_form(server: OAuthServer) -> None:
    with httpx2.Client(base_url=server.base, timeout=30) as browser:
        first = CSRF.search(browser.get("/ui/sign-in").text)
        second = CSRF.search(browser.get("/ui/sign-in").text)
        assert first and second and first.group(1) == second.group(1)
        answer = browser.post("/ui/sign-in", data={"csrf": first.group(1), "key": server.key})
        assert answer.status_code == 303


def test_a_key_that_cannot_be_one_is_refused_without_asking_the_vault(
    server: OAuthServer,
) -> None:
    with httpx2.Client(base_url=server.base, timeout=30) as browser:
        token = CSRF.search(browser.get("/ui/sign-in").text)
        assert token
        for key in ("mk_é", "mk_a\nb", "mk_" + "a" * 300):
            answer = browser.post("/ui/sign-in", data={"csrf": token.group(1), "key": key})
            assert answer.status_code == 401, key[:10]
            assert "not a key of this server" in answer.text
