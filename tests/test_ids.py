"""Ids: session ids are uuid7 strings, message ids uuid4, whatever generator makes them."""

from __future__ import annotations

import os
import time
import uuid

from hypothesis import given, strategies as st

from subagents.ids import (
    _uuid7_text,
    check_session_id,
    new_message_id,
    new_session_id,
)


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


def test_a_forked_process_makes_message_ids_its_parent_does_not() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, then out without running anything of pytest's
        os.write(write, " ".join(new_message_id() for _ in range(100)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        forked = pipe.read().split()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    here = [new_message_id() for _ in range(100)]
    assert len(forked) == 100
    assert not set(forked) & set(here)
    assert all(uuid.UUID(m).version == 4 for m in forked)
