"""The prefix-cache probe (`bench/prefix_cache.py`) against a chat server on loopback.

The probe sends each request the runtime makes to a real OpenAI-compatible server, records
the usage it reports and plays a scripted answer instead. Its figures are only worth
something if every request reaches the server, capped at one token, and each sample holds
what the server said about that request.
"""

from __future__ import annotations

from bench.prefix_cache import as_json, measure, report
from chat_server import ChatServer, finish_chunk, stream_reply, text_chunk, usage_chunk

CALLS = 11
"""Both scenarios' requests: the lead's two and its children's one each in `foreground`,
the lead's five and the worker's two in `background`."""


async def test_every_request_reaches_the_server_and_its_usage_is_recorded() -> None:
    with ChatServer() as server:
        server.enqueue(
            *(
                stream_reply(
                    text_chunk("ignored"),
                    finish_chunk("stop"),
                    usage_chunk(1000 + n, 1, cached=10 * n),
                )
                for n in range(CALLS)
            )
        )
        samples = await measure(server.base_url, "none", "local")
        bodies = server.bodies
    assert [(s.prompt_tokens, s.cached_tokens) for s in samples] == [
        (1000 + n, 10 * n) for n in range(CALLS)
    ]
    assert all(body["max_tokens"] == 1 for body in bodies)  # the probe's cap, not the run's
    assert len(bodies) == CALLS
    assert [s.agent for s in samples if s.scenario == "foreground"] == [
        "lead",
        "alpha",
        "beta",
        "lead",
    ]
    assert sorted({s.agent for s in samples if s.scenario == "background"}) == ["lead", "worker"]
    assert "children's first calls" in report(samples)
    assert '"count": 11' in as_json(samples)
