"""Bad `Limits` are refused when made, with one line naming the field, before any run."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, strategies as st

from subagents.errors import ConfigError, ErrorCode
from subagents.policy import Limits

WHOLE = ["cpu_seconds", "address_space_mb", "open_files", "file_size_mb", "processes", "tmpfs_mb"]


@pytest.mark.parametrize("field", WHOLE)
@pytest.mark.parametrize("value", [0, -1, 1.5, "8", True, None])
def test_a_whole_number_field_refuses_anything_else(field: str, value: object) -> None:
    with pytest.raises(ConfigError) as caught:
        Limits(**{field: value})  # pyright: ignore[reportArgumentType]
    assert caught.value.code == ErrorCode.USAGE
    assert caught.value.message == (
        f"Limits.{field} must be a whole number of at least 1, got {value!r}"
    )
    assert "\n" not in caught.value.message


@pytest.mark.parametrize("value", [0, -0.5, math.nan, True])
def test_the_wall_clock_limit_must_be_positive_or_none(value: float) -> None:
    with pytest.raises(ConfigError) as caught:
        Limits(wall_seconds=value)
    assert caught.value.code == ErrorCode.USAGE
    assert "Limits.wall_seconds must be above 0 or None" in caught.value.message


@given(st.integers(min_value=1, max_value=1 << 20))
def test_every_positive_whole_number_is_kept(value: int) -> None:
    limits = Limits(tmpfs_mb=value, processes=value, wall_seconds=None)
    assert (limits.tmpfs_mb, limits.processes, limits.wall_seconds) == (value, value, None)
