"""A user's own server (the starter crate: a resource, a prompt whose
argument completes, a synchronous tool that reports progress) through the
Python `mcp` SDK 2.3.0 (pinned in requirements.txt), in `auto` mode (which
picks 2026-07-28) and in `legacy` mode (2025-11-25).

    python tests/clients/python_user.py http://127.0.0.1:PORT/mcp

Prints one line per check and `python user server: N passed, N failed`;
exits non-zero on any failure.
"""

import sys

import anyio
from mcp import Client
from mcp_types import Implementation, PromptReference

from checks import check, finish

URL = sys.argv[1]


async def check_mode(mode: str, want: str) -> None:
    async def body() -> None:
        async with Client(URL, mode=mode, client_info=Implementation(name="python-user-test", version="2.3.0")) as client:
            assert client.protocol_version == want, f"protocol {client.protocol_version}"
            resources = await client.list_resources()
            assert [str(r.uri) for r in resources.resources] == ["starter://about"], resources
            about = await client.read_resource("starter://about")
            assert about.contents[0].text.startswith("# Starter"), about
            prompts = await client.list_prompts()
            assert [p.name for p in prompts.prompts] == ["watch_deploy"], prompts
            assert prompts.prompts[0].arguments[0].required, prompts
            got = await client.get_prompt("watch_deploy", {"url": "https://example.com/health"})
            assert "https://example.com/health" in got.messages[0].content.text, got
            done = await client.complete(PromptReference(name="watch_deploy"), {"name": "url", "value": "http://"})
            assert done.completion.values == ["http://127.0.0.1:8080/health"], done
            seen = []

            async def on_progress(progress, total, message):
                seen.append((progress, total))

            r = await client.call_tool(
                "check_urls", {"urls": ["https://a.example", "nope", "http://b.example/x"]},
                progress_callback=on_progress,
            )
            assert r.structured_content == {
                "usable": ["https://a.example", "http://b.example/x"],
                "unusable": ["nope"],
            }, r
            assert [p for p, _ in seen] == [0, 1, 2, 3], f"progress {seen}"
            assert all(t == 3 for _, t in seen), f"progress {seen}"

    await check(f"python mcp 2.3.0, mode={mode}: the starter's resource, prompt, completion and progress", body)


async def main() -> None:
    await check_mode("auto", "2026-07-28")
    await check_mode("legacy", "2025-11-25")


anyio.run(main)
finish("python user server")
