"""The explorer's "new key" form applies the rule POST /v1/keys does: a name holding
control or formatting characters gets a page that says so, and no key."""

from __future__ import annotations

import pytest

from tests.support.oauth import OAuthServer
from tests.support.ui import api, csrf_of, signed_in


@pytest.mark.parametrize("name", ["\x1b]52;c;ZXZpbA==\x07", "\u202eevil", "a\x85b"])
def test_a_key_name_with_control_characters_is_a_400_page_and_no_key(
    server: OAuthServer, name: str
) -> None:
    with signed_in(server, server.key) as browser:
        answer = browser.post("/ui/keys", data={"csrf": csrf_of(browser), "name": name})
    assert answer.status_code == 400
    assert 'role="alert"' in answer.text
    assert [k["name"] for k in api(server, "GET", "/v1/keys", server.key)["keys"]] == ["default"]
