"""Ids: session ids are uuid7 strings, message ids uuid4, whatever generator makes them."""

from __future__ import annotations

import time
import uuid

from hypothesis import given, strategies as st

from subagents.ids import (
    _uuid4_text,
    _uuid7_text,
    check_session_id,
    new_message_id,
    new_session_id,
)


@given(st.integers(min_value=0, max_value=(1 << 128) - 1))
def test_uuid4_text_is_the_uuid_modules_spelling(bits: int) -> None:
    assert _uuid4_text(bits) == str(uuid.UUID(int=bits, version=4))


@given(
    st.integers(min_value=0, max_value=(1 << 48) - 1),
    st.integers(min_value=0, max_value=(1 << 80) - 1),
)
def test_uuid7_text_keeps_the_millisecond_and_74_random_bits(millis: int, bits: int) -> None:
    parsed = uuid.UUID(_uuid7_text(millis, bits))
    assert (parsed.version, parsed.variant) == (7, uuid.RFC_4122)
    assert parsed.int >> 80 == millis
    kept = ((1 << 80) - 1) & ~((0xF << 76) | (0x3 << 62))
    assert parsed.int & kept == bits & kept


def test_new_ids_are_distinct_uuids_a_session_id_check_accepts() -> None:
    before = time.time_ns() // 1_000_000
    sessions = [new_session_id() for _ in range(500)]
    after = time.time_ns() // 1_000_000
    messages = [new_message_id() for _ in range(500)]
    assert len(set(sessions + messages)) == 1000
    for text, version in [(s, 7) for s in sessions] + [(m, 4) for m in messages]:
        parsed = uuid.UUID(text)
        assert (str(parsed), parsed.version, parsed.variant) == (text, version, uuid.RFC_4122)
        assert check_session_id(text) == text
    # Made in order, so the store files them in order; within a millisecond they are random.
    stamps = [uuid.UUID(s).int >> 80 for s in sessions]
    assert stamps == sorted(stamps)
    assert before <= stamps[0] <= stamps[-1] <= after
