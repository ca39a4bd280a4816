"""The Python `mcp` SDK (2.3.0, pinned in requirements.txt) against a running
server, in its default `auto` mode (which must pick 2026-07-28) and in its
forced `legacy` mode (2025-11-25 through the legacy adapter).

    python tests/clients/python_client.py http://127.0.0.1:PORT/mcp

Prints one line per check and `python mcp: N passed, N failed`; exits
non-zero on any failure.
"""

import sys

import anyio
from mcp import Client
from mcp_types import ElicitResult, Implementation

from checks import check, finish

URL = sys.argv[1]


async def on_elicit(context, params):
    props = (params.requested_schema or {}).get("properties", {})
    if "approved" in props:
        return ElicitResult(action="accept", content={"approved": True})
    return ElicitResult(action="accept", content={"username": "ada", "email": "ada@example.com"})


async def check_mode(mode: str, want: str) -> None:
    async def body() -> None:
        async with Client(
            URL,
            mode=mode,
            client_info=Implementation(name="python-client-test", version="2.3.0"),
            elicitation_callback=on_elicit,
        ) as client:
            assert client.protocol_version == want, f"protocol {client.protocol_version}"
            tools = await client.list_tools()
            names = {t.name for t in tools.tools}
            assert {"greet", "generate_report"} <= names, f"tools {sorted(names)}"
            r = await client.call_tool("greet", {"name": "Ada"})
            assert r.content[0].text == "Hello, Ada!", r
            if mode == "legacy":
                # Asked on the response stream, answered by the callback.
                r = await client.call_tool("test_elicitation", {"message": "Who are you?"})
                assert "ada@example.com" in r.content[0].text, r

    await check(
        f"python mcp 2.3.0, mode={mode}: negotiates {want}, lists tools, calls greet and test_elicitation",
        body,
    )


async def main() -> None:
    await check_mode("auto", "2026-07-28")
    await check_mode("legacy", "2025-11-25")


anyio.run(main)
finish("python mcp")
