"""One MCP connection of the Python SDK (`mcp`), driven line by line by the client matrix test.

    python driver.py MODE [--elicit] -- CMD ARGS...          # a server over stdio
    python driver.py MODE [--elicit] --url URL --bearer TOK  # streamable HTTP

MODE is the SDK's own `mode=`: `auto` (probes `server/discover`, speaks 2026-07-28 where the
server does) or `legacy` (the `initialize` handshake). With `--elicit` the client declares form
elicitation and answers each question as the current `call` command says.

The first line on stdout is `{"ready": true, "protocol": VERSION}` (or `{"error": ...}`). Then
each JSON command read from stdin gets one JSON line back:

    {"op": "list"}                                   -> {"tools": [...]}
    {"op": "call", "tool": T, "args": {...},
     "answer": "accept"|"decline"|"cancel"}          -> {"result": {...}, "asked": [...]}

A call the SDK itself refuses (a validation error, a protocol error) answers
`{"error": "..."}`: the test reports it as the row's failure, with the SDK's words.
"""

import json
import os
import sys
from contextlib import AsyncExitStack

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import ElicitResult


def say(value):
    sys.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class Host:
    """The person behind the host: answers each approval question as told, and keeps them."""

    def __init__(self):
        self.answer = "cancel"
        self.asked = []

    async def elicit(self, _context, params):
        self.asked.append(params.message)
        if self.answer == "accept":
            return ElicitResult(action="accept", content={"approve": True})
        return ElicitResult(action=self.answer)


def parse(argv):
    mode, rest = argv[0], argv[1:]
    elicit = "--elicit" in rest
    rest = [a for a in rest if a != "--elicit"]
    if rest and rest[0] == "--":
        return mode, elicit, {"command": rest[1], "args": rest[2:]}
    url = rest[rest.index("--url") + 1]
    bearer = rest[rest.index("--bearer") + 1] if "--bearer" in rest else None
    return mode, elicit, {"url": url, "bearer": bearer}


async def connect(stack, mode, host, target):
    callback = host.elicit if host is not None else None
    if "command" in target:
        # The server inherits this process's environment: the test sets COUNTERSIGN_HOME there.
        server = StdioServerParameters(command=target["command"], args=target["args"], env=dict(os.environ))
    else:
        headers = {"Authorization": f"Bearer {target['bearer']}"} if target["bearer"] else None
        http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
        server = streamable_http_client(target["url"], http_client=http)
    client = Client(server, mode=mode, elicitation_callback=callback)
    return await stack.enter_async_context(client)


async def serve(client, host):
    while True:
        line = await anyio.to_thread.run_sync(sys.stdin.readline)
        if not line:
            return
        command = json.loads(line)
        try:
            if command["op"] == "list":
                listed = await client.list_tools()
                say({"tools": [dump(t) for t in listed.tools]})
            elif command["op"] == "call":
                if host is not None:
                    host.answer = command.get("answer", "cancel")
                    host.asked = []
                result = await client.call_tool(command["tool"], command.get("args", {}))
                say({"result": dump(result), "asked": host.asked if host is not None else []})
            else:
                say({"error": f"unknown op {command['op']}"})
        except Exception as e:  # the SDK's refusal is the answer the test reports
            say({"error": f"{type(e).__name__}: {e}"})


async def main():
    mode, elicit, target = parse(sys.argv[1:])
    host = Host() if elicit else None
    async with AsyncExitStack() as stack:
        try:
            client = await connect(stack, mode, host, target)
        except Exception as e:
            say({"error": f"connect: {type(e).__name__}: {e}"})
            return
        say({"ready": True, "protocol": client.protocol_version})
        await serve(client, host)


if __name__ == "__main__":
    anyio.run(main)
