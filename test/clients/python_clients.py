"""The official Python SDK (`mcp` 2.3.0) and FastMCP's `Client` (4.0.10) against this service.

Run by CI through test/e2e/python-clients.test.ts (the venv: scripts/python-clients.mjs). Each
run connects once, in MODE `legacy` (the
2025-11-25 initialize handshake) or `auto` (2026-07-28 through server/discover), with an API key,
reports the protocol version it negotiated ("connect": 2025-11-25 in `legacy`, 2026-07-28 in
`auto`), then makes four calls: deep_research and share_report, whose questions the elicitation callback
answers (audience "team", notify true); countdown {3} with progress; countdown {10} abandoned
after 1.5 s, which sends notifications/cancelled (2025) or closes the request (2026). The task of
the abandoned call must be `cancelled` in Redis within 3 s of the abandon (its record's
`lastUpdatedAt`, read with redis-cli under
REDIS_PREFIX, the deployment's REDIS_KEY_PREFIX, on REDIS_URL).

    node scripts/python-clients.mjs     # tools/python/.venv with tools/python/requirements.txt
    tools/python/.venv/bin/python test/clients/python_clients.py URL KEY mcp|fastmcp legacy|auto REDIS_PREFIX [REDIS_URL]

Prints one JSON line per call: {client, mode, call, ok, detail, ms}; exits 0 either way.
"""
import asyncio
import json
import subprocess
import sys
import time

import anyio

URL, KEY, WHICH, MODE, PREFIX = sys.argv[1:6]
REDIS_URL = sys.argv[6] if len(sys.argv) > 6 else "redis://127.0.0.1:6379"
HEADERS = {"Authorization": f"Bearer {KEY}"}


def report(call, ok, detail, ms):
    print(json.dumps({"client": WHICH, "mode": MODE, "call": call, "ok": ok, "detail": str(detail)[:200], "ms": round(ms)}), flush=True)


def countdown_tasks():
    """(status, lastUpdatedAt ms) of every countdown task under PREFIX, by key, read from Redis."""
    keys = subprocess.run(["redis-cli", "-u", REDIS_URL, "--scan", "--pattern", f"{PREFIX}:{{t:*}}:task"], capture_output=True, text=True).stdout.split()
    out = {}
    for k in keys:
        tool, status, updated = subprocess.run(["redis-cli", "-u", REDIS_URL, "HMGET", k, "tool", "status", "lastUpdatedAt"], capture_output=True, text=True).stdout.split("\n")[:3]
        if tool == "countdown":
            out[k] = (status, int(updated or 0))
    return out


def answer_for(message):
    if "Who is the report" in message:
        return {"audience": "team"}
    if "Share to" in message:
        return {"notify": True}
    return {}


async def run_mcp():
    import mcp_types as types
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    asked = []

    async def on_elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content=answer_for(params.message))

    transport = streamable_http_client(URL, http_client=create_mcp_http_client(headers=HEADERS))
    async with Client(transport, mode=MODE, elicitation_callback=on_elicit) as client:
        await exercise(client, asked, lambda name, args, progress=None: client.call_tool(name, args, progress_callback=progress))


async def run_fastmcp():
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport

    asked = []

    async def on_elicit(message, response_type, params, context):
        asked.append(message)
        return answer_for(message)

    client = Client(StreamableHttpTransport(URL, headers=HEADERS), mode=MODE, elicitation_handler=on_elicit)
    async with client:
        await exercise(client, asked, lambda name, args, progress=None: client.call_tool(name, args, progress_handler=progress, raise_on_error=False))


async def exercise(client, asked, call):
    version = str(getattr(client, "protocol_version", None))
    expected = "2025-11-25" if MODE == "legacy" else "2026-07-28"
    report("connect", version == expected, f"protocol {version}", 0)
    t0 = time.time()
    r = await call("deep_research", {"topic": "python clients"})
    sc = getattr(r, "structured_content", None) or getattr(r, "structuredContent", None) or {}
    report("deep_research", bool(sc) and sc.get("audience") == "team" and len(asked) == 1, sc.get("summary") if sc else r, (time.time() - t0) * 1000)
    t0 = time.time()
    r = await call("share_report", {"channel": "#py"})
    sc = getattr(r, "structured_content", None) or getattr(r, "structuredContent", None) or {}
    report("share_report", bool(sc) and sc.get("notify") is True and len(asked) == 2, sc.get("summary") if sc else r, (time.time() - t0) * 1000)
    progress = []

    async def on_progress(p, total, message):
        progress.append(p)

    t0 = time.time()
    r = await call("countdown", {"seconds": 3}, on_progress)
    text = " ".join(getattr(c, "text", "") for c in r.content)
    report("countdown3+progress", "finished" in text and len(progress) >= 3, f"{text} progress={progress}", (time.time() - t0) * 1000)
    before = countdown_tasks()
    t0 = time.time()
    with anyio.move_on_after(1.5):
        await call("countdown", {"seconds": 10})
    cancelled_at = time.time()
    # The task's own record says when it became cancelled (lastUpdatedAt, ms): that, not when
    # this loop gets to see it (a redis-cli process per read, slow on a busy machine), is what
    # must be within 3 s of the cancel.
    new = {}
    while time.time() - cancelled_at < 20:
        now = countdown_tasks()
        new = {k: v for k, v in now.items() if k not in before}
        if new and all(v[0] == "cancelled" for v in new.values()):
            break
        await asyncio.sleep(0.05)
    done = bool(new) and all(v[0] == "cancelled" for v in new.values())
    ms = max((v[1] - cancelled_at * 1000 for v in new.values()), default=float("inf")) if done else (time.time() - cancelled_at) * 1000
    report("cancel countdown10", done and ms < 3000, f"{ {k: v[0] for k, v in new.items()} } seen after {round((time.time() - cancelled_at) * 1000)} ms", ms)


asyncio.run(run_mcp() if WHICH == "mcp" else run_fastmcp())
