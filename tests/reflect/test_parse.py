"""Reading a model's answer, the model input layout and the server's debt decision."""

from __future__ import annotations

import json

import pytest

from mcp_memoryrouter import limits, schemas
from mcp_memoryrouter.errors import InvalidAnswer
from mcp_memoryrouter.reflect.parse import EntryRules, parse_answer
from mcp_memoryrouter.reflect.prompt import model_input, retry_input
from mcp_memoryrouter.reflect.trigger import next_tier, tiers_named
from mcp_memoryrouter.vault.rules.contract import check_entries, reflection_contract
from mcp_memoryrouter.vault.rules.domain import Entry

ENTRIES = [{"text": "  Ana chose Postgres for auth.  ", "importance": 7}]
RULES = EntryRules()


def contract(**changes: object) -> schemas.ReflectionContract:
    body: dict[str, object] = {
        "version": 1,
        "target_tier": 2,
        "instructions": "Write reflections.\nRules: answer JSON.",
        "entry_schema": {
            "text": "string, 1 to 8000 chars, clean standalone prose, no IDs or scores inline",
            "importance": "integer 1 to 10",
        },
        "min_entries": 1,
        "max_entries": 100,
        "recommended_entries": "5-10",
        **changes,
    }
    return schemas.ReflectionContract.model_validate(body)


@pytest.mark.parametrize(
    "answer",
    [
        json.dumps(ENTRIES),
        json.dumps({"entries": ENTRIES}),
        f"```json\n{json.dumps(ENTRIES)}\n```",
        f"```\n{json.dumps({'entries': ENTRIES})}\n```",
        f"Here you go [as asked]:\n\n```json\n{json.dumps(ENTRIES, indent=2)}\n```\nDone.",
        f"Sure! {json.dumps(ENTRIES)} Hope that helps.",
        f"Note [1] first. {json.dumps(ENTRIES)}",
    ],
)
def test_answers_in_the_shapes_models_write_are_read_and_trimmed(answer: str) -> None:
    assert parse_answer(answer, RULES) == [
        schemas.EntryIn(text="Ana chose Postgres for auth.", importance=7)
    ]


@pytest.mark.parametrize(
    ("entries", "field"),
    [
        ([{"text": "x", "importance": 7.0}], "importance"),
        ([{"text": "x", "importance": True}], "importance"),
        ([{"text": "x", "importance": "7"}], "importance"),
        ([{"text": "x", "importance": 11}], "importance"),
        ([{"text": "x", "importance": 0}], "importance"),
        ([{"text": "x"}], "importance"),
        ([{"text": "   ", "importance": 5}], "text"),
        ([{"text": "x" * 8001, "importance": 5}], "text"),
        ([{"text": 5, "importance": 5}], "text"),
        ([{"text": "About 7c9e6679-7425-40de-944b-e07fc1f90ae7.", "importance": 5}], "text"),
        ([{"text": "From batch cb_9f2c0a1b2c3d.", "importance": 5}], "text"),
        (["just a string"], "entries[0]"),
    ],
)
def test_entries_that_break_the_contract_are_rejected_naming_the_field(
    entries: list[object], field: str
) -> None:
    with pytest.raises(InvalidAnswer, match=r"entries\[0\]") as raised:
        parse_answer(json.dumps(entries), RULES)
    assert field in raised.value.message
    assert "7c9e6679" not in raised.value.message  # the error never echoes the text


def test_entry_counts_follow_the_contract() -> None:
    rules = EntryRules.of(contract(min_entries=2, max_entries=3))
    one = json.dumps(ENTRIES)
    with pytest.raises(InvalidAnswer, match="2 to 3 entries"):
        parse_answer(one, rules)
    with pytest.raises(InvalidAnswer, match="2 to 3 entries"):
        parse_answer(json.dumps(ENTRIES * 4), rules)
    assert len(parse_answer(json.dumps(ENTRIES * 3), rules)) == 3
    with pytest.raises(InvalidAnswer):
        parse_answer("[]", RULES)


@pytest.mark.parametrize(
    ("text", "importance"),
    [
        ("x" * limits.ENTRY_CHARS_MAX, limits.IMPORTANCE_MAX),
        ("  " + "x" * limits.ENTRY_CHARS_MAX + "  ", limits.IMPORTANCE_MIN),
        ("x" * (limits.ENTRY_CHARS_MAX + 1), 5),
        ("x", limits.IMPORTANCE_MAX + 1),
        ("x", limits.IMPORTANCE_MIN - 1),
    ],
)
def test_the_client_accepts_exactly_the_entries_the_vault_accepts(
    text: str, importance: int
) -> None:
    """One source for the bounds: what the server's contract says, what its commit checks
    and what the client holds a model's answer to are the same numbers."""
    answer = json.dumps([{"text": text, "importance": importance}])
    try:
        check_entries([Entry(text, importance)])
        vault_accepts = True
    except Exception:
        vault_accepts = False
    try:
        parse_answer(answer, EntryRules.of(contract()))
        client_accepts = True
    except InvalidAnswer:
        client_accepts = False
    assert client_accepts == vault_accepts
    schema = reflection_contract(1)["entry_schema"]
    assert f"{limits.ENTRY_CHARS_MIN} to {limits.ENTRY_CHARS_MAX} chars" in schema["text"]
    assert schema["importance"] == f"integer {limits.IMPORTANCE_MIN} to {limits.IMPORTANCE_MAX}"


@pytest.mark.parametrize(
    "answer", ["", "I cannot do that.", '{"reflections": []}', "[1, 2", "```json\n{oops}\n```"]
)
def test_an_answer_without_entries_is_rejected(answer: str) -> None:
    with pytest.raises(InvalidAnswer):
        parse_answer(answer, RULES)


def test_the_model_input_is_the_instructions_verbatim_then_one_dated_line_per_memory() -> None:
    memories = [
        schemas.CheckoutMemory(text="We chose Postgres.", date="2026-02-01T04:11:09.000Z"),
        schemas.CheckoutMemory(text="Auth uses JWT.", date="2026-02-02T10:00:00.000Z"),
    ]
    text = model_input(contract(), memories)
    assert text == (
        "Write reflections.\nRules: answer JSON.\n\n"
        "[2026-02-01T04:11:09.000Z] We chose Postgres.\n"
        "[2026-02-02T10:00:00.000Z] Auth uses JWT.\n"
    )
    retry = retry_input(text, "entries[0].importance must be an integer from 1 to 10")
    assert retry.startswith(text)
    assert retry[len(text) :].count("\n") == 2  # one blank line, one line of error


@pytest.mark.parametrize(
    ("suggestion", "tiers"),
    [
        (None, ()),
        ("raw consolidation suggested: 39600 unconsolidated importance", (1,)),
        ("tier 2 consolidation suggested: 640 unconsolidated importance", (2,)),
        (
            "raw consolidation suggested: 180 unconsolidated importance; "
            "tier 2 consolidation suggested: 200 unconsolidated importance",
            (1, 2),
        ),
        ("something new the server says", ()),
    ],
)
def test_the_suggestion_names_the_tiers_to_consolidate_raw_first(
    suggestion: str | None, tiers: tuple[int, ...]
) -> None:
    assert tiers_named(suggestion) == tiers
    assert next_tier(suggestion) == (tiers[0] if tiers else None)


SECOND = EntryRules(labels=("R1", "R2"), lines=3)


def test_contract_2_fields_are_read_from_the_answer() -> None:
    answer = json.dumps(
        [
            {"text": "Ana lives in Denver.", "importance": 7, "replaces": ["R2"], "cites": [3]},
            {"text": "Metric units, always.", "importance": 8, "kind": "preference"},
        ]
    )
    first, second = parse_answer(answer, SECOND)
    assert (first.replaces, first.cites, first.kind) == (["R2"], [3], None)
    assert (second.replaces, second.cites, second.kind) == ([], [], "preference")


def test_a_label_that_was_not_shown_is_refused_naming_the_labels_shown() -> None:
    answer = json.dumps([{"text": "Ana lives in Denver.", "importance": 7, "replaces": ["R3"]}])
    with pytest.raises(InvalidAnswer, match=r"entries\[0\]\.replaces names R3.*shown: R1, R2"):
        parse_answer(answer, SECOND)
    beyond = json.dumps([{"text": "Ana lives in Denver.", "importance": 7, "replaces": ["L4"]}])
    with pytest.raises(InvalidAnswer, match=r"names L4.*lines L1 to L3"):
        parse_answer(beyond, SECOND)
    line = json.dumps([{"text": "Ana lives in Denver.", "importance": 7, "replaces": ["L2"]}])
    assert parse_answer(line, SECOND)[0].replaces == ["L2"]
    with pytest.raises(InvalidAnswer, match="shown: none"):
        parse_answer(answer, EntryRules())


def test_cites_outside_the_batch_and_an_unknown_kind_are_left_out() -> None:
    item = {"text": "Ana lives in Denver.", "importance": 7, "cites": [0, 2, 4, "1"], "kind": "x"}
    [entry] = parse_answer(json.dumps([item]), SECOND)
    assert (entry.cites, entry.kind) == ([2], None)


def test_contract_2_memory_lines_are_numbered() -> None:
    memories = [
        schemas.CheckoutMemory(text="We chose Postgres.", date="2026-02-01T04:11:09.000Z", line=1)
    ]
    assert model_input(contract(), memories).endswith(
        "\n\n1. [2026-02-01T04:11:09.000Z] We chose Postgres.\n"
    )
