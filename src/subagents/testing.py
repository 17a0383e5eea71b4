"""Test doubles shared by users and our own tests.

A scripted model, an in-memory store and a fake clock.
"""

from ._clock import FakeClock as FakeClock
from .models._scripted import (
    ScriptedCall as ScriptedCall,
    ScriptedModel as ScriptedModel,
    ScriptedResponse as ScriptedResponse,
)
from .sessions import InMemoryEventStore as InMemoryEventStore

__all__ = ["FakeClock", "InMemoryEventStore", "ScriptedCall", "ScriptedModel", "ScriptedResponse"]
