"""Ids: uuid4 strings, whatever generator makes them."""

from __future__ import annotations

import uuid

from hypothesis import given, strategies as st

from subagents.ids import _uuid4_text, check_session_id, new_message_id, new_session_id


@given(st.integers(min_value=0, max_value=(1 << 128) - 1))
def test_uuid4_text_is_the_uuid_modules_spelling(bits: int) -> None:
    assert _uuid4_text(bits) == str(uuid.UUID(int=bits, version=4))


def test_new_ids_are_distinct_version_4_uuids_a_session_id_check_accepts() -> None:
    ids = [new_session_id() for _ in range(500)] + [new_message_id() for _ in range(500)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert (str(parsed), parsed.version, parsed.variant) == (text, 4, uuid.RFC_4122)
        assert check_session_id(text) == text
