from __future__ import annotations

import pytest

from subagents.testing import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
