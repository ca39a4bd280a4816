"""Benchmark peer built on FastMCP 4.1.4 + fastmcp-tasks 4.1.4.

Serves MCP 2026-07-28 over stateless Streamable HTTP (JSON responses) at
http://127.0.0.1:$PORT/mcp with the io.modelcontextprotocol/tasks extension
(fastmcp-tasks' TasksExtension on its default in-memory Docket backend).

Tools, with the same observable behaviour as mcp-tasks-edge's demo set as far
as FastMCP allows (deviations: bench/README.md):

- generate_report {size}: always a task. `working` ("Preparing report
  outline.") for OUTLINE_MS (default 1000), then `input_required` with one form
  elicitation. fastmcp-tasks surfaces it under a server-minted key
  "<taskId>:<16 hex>" and maps the answer back to the tool's own key
  `approve_outline`. Completes after tasks/update.
- slow_compute {seconds, label?}: a task when the caller declared the
  extension, synchronous otherwise.
- greet {name}: synchronous.

Usage: venv/bin/python fastmcp_server.py [PORT]   (or env PORT, default 8082)
Env: OUTLINE_MS (default 1000), POLL_INTERVAL_MS (default 1000),
     LOG_LEVEL (default WARNING).
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta
from typing import Annotated, Literal

import mcp_types
from pydantic import Field

from mcp.shared.exceptions import MCPError

from fastmcp import Context, FastMCP
from fastmcp.server.middleware import Middleware, MiddlewareContext
from fastmcp.tools.base import ToolResult
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension

APPROVE_KEY = "approve_outline"


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


OUTLINE_MS = max(0, _env_int("OUTLINE_MS", 1000))
POLL_INTERVAL = timedelta(milliseconds=max(1, _env_int("POLL_INTERVAL_MS", 1000)))

CLIENT_CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
TASKS_ID = "io.modelcontextprotocol/tasks"


class RequireReportCapabilities(Middleware):
    """generate_report needs the tasks extension AND form elicitation on the
    request (as in our server): answer -32021 naming what is missing.
    fastmcp-tasks itself only checks the tasks extension."""

    async def on_call_tool(self, context: MiddlewareContext, call_next):
        if context.message.name == "generate_report":
            ctx = context.fastmcp_context
            rc = ctx.request_context if ctx is not None else None
            caps = ((rc.meta or {}) if rc is not None else {}).get(CLIENT_CAPS_KEY) or {}
            missing: dict = {}
            if not isinstance((caps.get("extensions") or {}).get(TASKS_ID), dict):
                missing["extensions"] = {TASKS_ID: {}}
            elicitation = caps.get("elicitation")
            if not isinstance(elicitation, dict) or (
                "form" not in elicitation and "url" in elicitation
            ):
                missing["elicitation"] = {"form": {}}
            if missing:
                raise MCPError(
                    code=-32021,
                    message="Missing required client capability",
                    data={"requiredCapabilities": missing},
                )
        return await call_next(context)


mcp = FastMCP("fastmcp-peer-server")
mcp.add_extension(TasksExtension())
mcp.add_middleware(RequireReportCapabilities())


def _number(x: float) -> str:
    """Format like our server (Rust `{}` for f64): 2.0 -> "2", 0.5 -> "0.5"."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _approval_request() -> mcp_types.ElicitRequest:
    return mcp_types.ElicitRequest(
        params=mcp_types.ElicitRequestFormParams(
            message="Approve the generated report outline?",
            requested_schema={
                "type": "object",
                "properties": {
                    "approved": {"type": "boolean", "title": "Approve outline"}
                },
                "required": ["approved"],
            },
        )
    )


@mcp.tool(
    title="Generate report",
    description=(
        "Drafts a report outline, asks you to approve it, then generates the "
        "report. Runs as a durable task."
    ),
    output_schema={
        "type": "object",
        "properties": {"size": {"type": "string"}, "approved": {"type": "boolean"}},
        "required": ["size", "approved"],
    },
    task=TaskConfig(mode="required", poll_interval=POLL_INTERVAL),
)
async def generate_report(
    size: Annotated[
        Literal["small", "medium", "large"],
        Field(description="How long the report should be."),
    ],
    ctx: Context,
) -> ToolResult | mcp_types.InputRequiredResult:
    # fastmcp-tasks runs a task as "legs": this body runs once per leg. Leg 1
    # has no answers yet and ends by returning the ask (the task parks as
    # input_required without holding a worker); tasks/update re-runs the body
    # with the answers on ctx.input_responses, keyed by our own key.
    answers = ctx.input_responses or {}
    answer = answers.get(APPROVE_KEY)
    if answer is None:
        await ctx.report_progress(0, message="Preparing report outline.")
        if OUTLINE_MS:
            await asyncio.sleep(OUTLINE_MS / 1000)
        return mcp_types.InputRequiredResult(
            input_requests={APPROVE_KEY: _approval_request()}
        )
    content = getattr(answer, "content", None) or {}
    approved = getattr(answer, "action", None) == "accept" and content.get("approved") is True
    if approved:
        text = f"Generated {size} report with approved outline."
    else:
        text = f"No {size} report was generated: the outline was not approved."
    return ToolResult(
        content=text, structured_content={"size": size, "approved": approved}
    )


@mcp.tool(
    title="Slow compute",
    description=(
        "Simulates work that takes the given number of seconds; runs as a task "
        "when the client supports tasks."
    ),
    output_schema=None,
    task=TaskConfig(mode="optional", poll_interval=POLL_INTERVAL),
)
async def slow_compute(
    seconds: Annotated[float, Field(ge=0, le=3600)],
    ctx: Context,
    label: str | None = None,
) -> ToolResult:
    if ctx.is_background_task:
        await ctx.report_progress(0, message="Computing.")
    if seconds > 0:
        await asyncio.sleep(seconds)
    name = label if label is not None else "computation"
    return ToolResult(
        content=f"{name}: finished after {_number(seconds)} seconds.",
        structured_content={"label": name, "seconds": seconds},
    )


@mcp.tool(
    title="Greet",
    description="Greets someone by name. Always answers at once.",
    output_schema=None,
)
async def greet(name: str) -> str:
    return f"Hello, {name}!"


def main() -> None:
    port = int(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("PORT", "8082"))
    log_level = os.environ.get("LOG_LEVEL", "WARNING")
    mcp.run(
        transport="http",
        host="127.0.0.1",
        port=port,
        path="/mcp",
        stateless_http=True,
        json_response=True,
        log_level=log_level,
        show_banner=False,
        uvicorn_config={"access_log": False},
    )


if __name__ == "__main__":
    main()
