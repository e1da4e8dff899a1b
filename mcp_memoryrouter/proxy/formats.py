"""What the chat proxy reads from, and writes into, each provider's own request format.

Four formats, never translated into one another (docs/proxy.md): OpenAI chat completions
(``messages``), OpenAI responses (``input`` and ``instructions``), Anthropic messages
(``messages`` and ``system``), Google generateContent (``contents`` and
``systemInstruction``). For each: the conversation's text turns (the
retrieval query and the turn to remember), where the memory block goes, the answer's text
in a whole response, and the answer assembled from a stream's events. Everything else in a
body (tools, images, thinking, cache markers, unknown fields) is left as the client sent it.

Pure: no I/O and no clock; bodies are parsed JSON values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["user", "assistant"]
OPT_OUT = "memory"  # a message carrying ``"memory": false`` is never stored


@dataclass(frozen=True)
class Turn:
    """A message's text, as the vault stores it: ``stored`` is False when the message opted
    out (``"memory": false``)."""

    role: Role
    text: str
    stored: bool = True


def strip_opt_outs(messages: object) -> bool:
    """Remove the ``memory`` opt-out field from every message of ``messages`` (providers
    refuse unknown fields); whether any was removed."""
    removed = False
    if isinstance(messages, list):
        for message in messages:
            if isinstance(message, dict) and OPT_OUT in message:
                del message[OPT_OUT]
                removed = True
    return removed


def _opted_in(message: dict[str, Any]) -> bool:
    return message.get(OPT_OUT) is not False


def _joined(parts: list[str]) -> str:
    return "\n".join(p for p in parts if p.strip()).strip()


def _text_parts(content: object, text_types: tuple[str, ...] = ("text",)) -> str:
    """A content string, or the text of the text parts of a content list (images, files,
    tool calls and results carry no text to remember)."""
    if isinstance(content, str):
        return content.strip()
    if not isinstance(content, list):
        return ""
    texts = [
        p["text"]
        for p in content
        if isinstance(p, dict) and p.get("type") in text_types and isinstance(p.get("text"), str)
    ]
    return _joined(texts)


@dataclass
class Assembly:
    """An answer being put together from a stream: its text so far, and whether the stream
    reached the end its format marks (a stream cut short is never stored)."""

    parts: list[str] = field(default_factory=list)
    complete: bool = False
    failed: bool = False

    @property
    def text(self) -> str:
        return "".join(self.parts).strip()


class Format:
    """One provider's request and response shapes (subclassed once per provider)."""

    name: str = ""
    messages_field: str = ""
    provider_key_header: str = ""  # where X-Provider-Key goes
    provider_key_prefix: str = ""

    def turn(self, message: object) -> Turn | None:
        """A message's text turn; None for what holds no text of the user or the model
        (instructions, tool results, images alone)."""
        raise NotImplementedError

    def turns(self, body: dict[str, Any]) -> list[Turn]:
        messages = body.get(self.messages_field)
        if not isinstance(messages, list):
            return []
        return [t for t in map(self.turn, messages) if t is not None]

    def newest(self, body: dict[str, Any]) -> Turn | None:
        """The message this call answers: the last one, when the user wrote text in it (a
        call that carries a tool's result back has nothing new from the user)."""
        messages = body.get(self.messages_field)
        if not isinstance(messages, list) or not messages:
            return None
        turn = self.turn(messages[-1])
        return turn if turn is not None and turn.role == "user" else None

    def inject(self, body: dict[str, Any], context: str) -> None:
        """Put ``context`` where this format keeps instructions (``body`` is changed)."""
        raise NotImplementedError

    def answer(self, response: object) -> str:
        """The answer's text in a whole (non-streamed) response."""
        raise NotImplementedError

    def feed(self, assembly: Assembly, event: str) -> None:
        """Add one server-sent event's data to ``assembly``."""
        raise NotImplementedError

    def strip_opt_outs(self, body: dict[str, Any]) -> bool:
        return strip_opt_outs(body.get(self.messages_field))


def _loaded(data: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


class OpenAIChat(Format):
    """``POST /v1/chat/completions``; also every OpenAI-compatible server."""

    name = "openai"
    messages_field = "messages"
    provider_key_header = "authorization"
    provider_key_prefix = "Bearer "
    _INSTRUCTIONS = ("system", "developer")

    def turn(self, message: object) -> Turn | None:
        return _chat_turn(message)

    def inject(self, body: dict[str, Any], context: str) -> None:
        messages = body.get("messages")
        if not isinstance(messages, list):
            return
        at = 0  # after the app's own leading instructions, which stay first
        while (
            at < len(messages)
            and isinstance(messages[at], dict)
            and messages[at].get("role") in self._INSTRUCTIONS
        ):
            at += 1
        messages.insert(at, {"role": "system", "content": context})

    def answer(self, response: object) -> str:
        choice = _first_choice(response)
        message = choice.get("message") if choice else None
        return _text_parts(message.get("content")) if isinstance(message, dict) else ""

    def feed(self, assembly: Assembly, event: str) -> None:
        if event.strip() == "[DONE]":
            assembly.complete = True
            return
        chunk = _loaded(event)
        if isinstance(chunk, dict) and "error" in chunk:
            assembly.failed = True
        choice = _first_choice(chunk)
        if choice is None:
            return
        delta = choice.get("delta")
        if isinstance(delta, dict) and isinstance(delta.get("content"), str):
            assembly.parts.append(delta["content"])
        if choice.get("finish_reason"):
            assembly.complete = True


def _chat_turn(message: object) -> Turn | None:
    """A user's or assistant's text in the OpenAI and Anthropic shapes (a string, or a list
    of parts of which the text ones count)."""
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
        return None
    text = _text_parts(message.get("content"))
    return Turn(message["role"], text, _opted_in(message)) if text else None


def _first_choice(response: object) -> dict[str, Any] | None:
    if not isinstance(response, dict):
        return None
    choices = response.get("choices")
    if not isinstance(choices, list):
        return None
    for choice in choices:
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            return choice
    return None


class AnthropicMessages(Format):
    """``POST /v1/messages``."""

    name = "anthropic"
    messages_field = "messages"
    provider_key_header = "x-api-key"

    def turn(self, message: object) -> Turn | None:
        return _chat_turn(message)

    def inject(self, body: dict[str, Any], context: str) -> None:
        system = body.get("system")
        if isinstance(system, list):
            # after the app's blocks, so a prompt-cache breakpoint among them still matches
            system.append({"type": "text", "text": context})
        elif isinstance(system, str) and system.strip():
            body["system"] = system + "\n\n" + context
        else:
            body["system"] = context

    def answer(self, response: object) -> str:
        if not isinstance(response, dict):
            return ""
        return _text_parts(response.get("content"))

    def feed(self, assembly: Assembly, event: str) -> None:
        data = _loaded(event)
        if not isinstance(data, dict):
            return
        kind = data.get("type")
        if kind == "content_block_delta":
            delta = data.get("delta")
            if isinstance(delta, dict) and delta.get("type") == "text_delta":
                assembly.parts.append(str(delta.get("text", "")))
        elif kind == "message_stop":
            assembly.complete = True
        elif kind == "error":
            assembly.failed = True


class GoogleGenerate(Format):
    """``POST /{version}/models/{model}:generateContent`` and ``:streamGenerateContent``."""

    name = "google"
    messages_field = "contents"
    provider_key_header = "x-goog-api-key"
    _SYSTEM_FIELDS = ("systemInstruction", "system_instruction")

    def turn(self, message: object) -> Turn | None:
        if not isinstance(message, dict):
            return None
        role = message.get("role") or "user"
        text = _google_text(message.get("parts"))
        if role not in ("user", "model") or not text:
            return None
        return Turn("user" if role == "user" else "assistant", text, _opted_in(message))

    def inject(self, body: dict[str, Any], context: str) -> None:
        for name in self._SYSTEM_FIELDS:
            system = body.get(name)
            if isinstance(system, dict):
                parts = system.get("parts")
                if isinstance(parts, list):
                    parts.append({"text": context})
                else:
                    system["parts"] = [{"text": context}]
                return
            if isinstance(system, str):  # the SDKs also accept a bare string
                body[name] = system + "\n\n" + context
                return
        body["systemInstruction"] = {"parts": [{"text": context}]}

    def answer(self, response: object) -> str:
        return _google_candidate_text(response)

    def feed(self, assembly: Assembly, event: str) -> None:
        chunk = _loaded(event)
        if isinstance(chunk, dict) and "error" in chunk:
            assembly.failed = True
            return
        text = _google_candidate_text(chunk, strip=False)
        if text:
            assembly.parts.append(text)
        candidate = _google_candidate(chunk)
        if candidate is not None and candidate.get("finishReason"):
            assembly.complete = True


def _google_text(parts: object, *, strip: bool = True) -> str:
    if not isinstance(parts, list):
        return ""
    texts = [
        p["text"]
        for p in parts
        if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")
    ]
    return _joined(texts) if strip else "".join(texts)


def _google_candidate(response: object) -> dict[str, Any] | None:
    if not isinstance(response, dict):
        return None
    candidates = response.get("candidates")
    if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict):
        return candidates[0]
    return None


def _google_candidate_text(response: object, *, strip: bool = True) -> str:
    candidate = _google_candidate(response)
    if candidate is None or not isinstance(candidate.get("content"), dict):
        return ""
    return _google_text(candidate["content"].get("parts"), strip=strip)


class OpenAIResponses(Format):
    """``POST /v1/responses``: ``input`` is a string (the user's message) or a list of items
    (messages with string or part content, and items without a role: tool calls, their
    outputs, reasoning); instructions live in ``instructions``."""

    name = "openai-responses"
    messages_field = "input"
    provider_key_header = "authorization"
    provider_key_prefix = "Bearer "
    _TEXT_TYPES = ("input_text", "output_text", "text")

    def turn(self, message: object) -> Turn | None:
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            return None
        if message.get("type", "message") != "message":
            return None
        text = _text_parts(message.get("content"), self._TEXT_TYPES)
        return Turn(message["role"], text, _opted_in(message)) if text else None

    def turns(self, body: dict[str, Any]) -> list[Turn]:
        given = body.get("input")
        if isinstance(given, str):
            return [Turn("user", given.strip())] if given.strip() else []
        return super().turns(body)

    def newest(self, body: dict[str, Any]) -> Turn | None:
        given = body.get("input")
        if isinstance(given, str):
            return Turn("user", given.strip()) if given.strip() else None
        return super().newest(body)

    def inject(self, body: dict[str, Any], context: str) -> None:
        # after the app's own instructions; a call's instructions are its own (a response it
        # continues by previous_response_id does not carry them over)
        instructions = body.get("instructions")
        if isinstance(instructions, str) and instructions.strip():
            body["instructions"] = instructions + "\n\n" + context
        else:
            body["instructions"] = context

    def answer(self, response: object) -> str:
        if not isinstance(response, dict):
            return ""
        return self._output_text(response.get("output"))

    def _output_text(self, output: object) -> str:
        if not isinstance(output, list):
            return ""
        texts = [
            _text_parts(item.get("content"), ("output_text",))
            for item in output
            if isinstance(item, dict) and item.get("type") == "message"
        ]
        return _joined(texts)

    def feed(self, assembly: Assembly, event: str) -> None:
        data = _loaded(event)
        if not isinstance(data, dict):
            return
        kind = data.get("type")
        if kind == "response.output_text.delta" and isinstance(data.get("delta"), str):
            assembly.parts.append(data["delta"])
        elif kind in ("response.completed", "response.incomplete"):
            assembly.complete = True  # incomplete: cut at the token limit, a whole answer
        elif kind in ("response.failed", "error"):
            assembly.failed = True


OPENAI, ANTHROPIC, GOOGLE = OpenAIChat(), AnthropicMessages(), GoogleGenerate()
OPENAI_RESPONSES = OpenAIResponses()
