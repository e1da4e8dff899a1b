"""How the pages show text from outside: hidden characters made visible, the text isolated,
and the host a browser returns to without a user name passing for it."""

from __future__ import annotations

import pytest

from mcp_memoryrouter.auth.display import return_host, shown, visible

BIDI_CONTROLS = [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C]


@pytest.mark.parametrize("code", [*BIDI_CONTROLS, 0x00, 0x1B, 0x7F, 0x85, 0x2028, 0x200B])
def test_a_bidi_or_control_character_is_shown_as_its_code_point(code: int) -> None:
    assert visible(f"a{chr(code)}b") == f"a<U+{code:04X}>b"


PERSIAN = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # a zero-width non-joiner inside
EMOJI = "\U0001f469\u200d\U0001f4bb"  # woman, zero-width joiner, laptop


@pytest.mark.parametrize("text", ["Claude", "عربي", "עברית", PERSIAN, EMOJI, "Zoë & co"])
def test_letters_of_any_script_and_the_joiners_are_left_as_they_are(text: str) -> None:
    assert visible(text) == text


def test_shown_text_is_escaped_and_isolated() -> None:
    assert shown("<b>x\u202e</b>") == "<bdi>&lt;b&gt;x&lt;U+202E&gt;&lt;/b&gt;</bdi>"


@pytest.mark.parametrize(
    ("uri", "host"),
    [
        ("https://claude.ai@evil.example/cb", "evil.example"),
        ("https://a:b@evil.example:8443/cb", "evil.example:8443"),
        ("http://127.0.0.1:7777/callback", "127.0.0.1:7777"),
        ("com.example.app:/callback", "com.example.app:"),
    ],
)
def test_the_return_host_never_shows_a_user_name(uri: str, host: str) -> None:
    assert return_host(uri) == host
