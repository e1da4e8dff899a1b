"""What the chat proxy stores of a turn is the proxy's (``stored_by.surface``), with the key
the call presented: a real server on loopback in front of the provider double, each format."""

from __future__ import annotations

import pytest

from tests.support.proxy import Proxied, call


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "google"])
def test_a_proxied_turn_records_the_proxy_surface_and_the_key(proxied: Proxied, fmt: str) -> None:
    (key,) = proxied.vault("GET", "/v1/keys")["keys"]
    proxied.remember("My dog is called Biscuit.")
    response = call(proxied, fmt)
    assert response.status_code == 200, response.text
    rows = proxied.stored_after(3)
    assert rows[0]["stored_by"] == {"surface": "rest", "key_id": key["id"], "key_name": key["name"]}
    for row in rows[1:]:
        assert row["stored_by"] == {
            "surface": "proxy",
            "key_id": key["id"],
            "key_name": key["name"],
        }
