"""What the Python client checks share: run each named check, print
`ok`/`FAIL` lines, then `<label>: N passed, N failed`, and exit non-zero on
any failure."""

import sys
import time

_results = []


async def check(name, body) -> None:
    """Runs the coroutine function `body`; any exception is a failure."""
    started = time.monotonic()
    try:
        await body()
        _results.append(True)
        print(f"ok   {name} ({(time.monotonic() - started) * 1000:.0f} ms)")
    except Exception as e:  # noqa: BLE001 - every failure is reported
        _results.append(False)
        print(f"FAIL {name}\n      {type(e).__name__}: {e}")


def finish(label: str) -> None:
    failed = _results.count(False)
    print(f"{label}: {len(_results) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
