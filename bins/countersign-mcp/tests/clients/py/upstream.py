"""A two-tool MCP server written with the Python SDK (`mcp`), the upstream of the proxy rows of
the client matrix: `read_notes` (read-only) returns the notes file, `append_note` appends its
arguments to it as one JSON line, so the test can count the runs and read the bytes each got.
The file is `$UPSTREAM_NOTES`. `MCPServer` gives both tools an `outputSchema` (`{"result":
string}`), as it does for every tool whose function returns a value.
"""

import json
import os

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

app = MCPServer("notes")
NOTES = os.environ["UPSTREAM_NOTES"]


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def read_notes() -> str:
    """Returns every note so far."""
    try:
        with open(NOTES, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return ""


@app.tool(annotations=ToolAnnotations(read_only_hint=False))
def append_note(text: str) -> str:
    """Appends a note."""
    with open(NOTES, "a", encoding="utf-8") as f:
        f.write(json.dumps({"text": text}, ensure_ascii=False, separators=(",", ":")) + "\n")
    return "appended"


if __name__ == "__main__":
    app.run()
