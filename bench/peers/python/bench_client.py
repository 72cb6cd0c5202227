"""The Python SDK's bench client for `cargo xtask bench --peers`.

`bench_client.py --calls N --in-flight K (--url URL | -- PROGRAM [ARG...])` prints the same
JSON line as the workspace's `bench-client`.
"""

import asyncio
import json
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

WARM_UP_CALLS = 200


def arguments():
    args = sys.argv[1:]
    calls, in_flight, url, program = 2000, 4, None, []
    while args:
        arg = args.pop(0)
        if arg == "--calls":
            calls = int(args.pop(0))
        elif arg == "--in-flight":
            in_flight = int(args.pop(0))
        elif arg == "--url":
            url = args.pop(0)
        elif arg == "--":
            program, args = args, []
        else:
            sys.exit(f"unknown argument {arg!r}")
    if (url is None and not program) or calls <= 0 or in_flight <= 0:
        sys.exit("usage: --calls N --in-flight K (--url URL | -- PROGRAM [ARG...])")
    return calls, in_flight, url, program


async def measure(session, calls, in_flight):
    await session.initialize()
    echo = lambda: session.call_tool("echo", {"message": "hello"})
    for _ in range(WARM_UP_CALLS):
        await echo()
    latencies = []
    serial_start = time.perf_counter()
    for _ in range(calls):
        start = time.perf_counter()
        await echo()
        latencies.append(time.perf_counter() - start)
    serial_total = time.perf_counter() - serial_start
    per_worker = -(-calls // in_flight)

    async def worker():
        for _ in range(per_worker):
            await echo()

    parallel_start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    parallel_total = time.perf_counter() - parallel_start
    latencies.sort()
    print(json.dumps({
        "serial_calls_per_s": round(calls / serial_total, 1),
        "serial_p50_us": round(latencies[len(latencies) // 2] * 1e6, 1),
        "parallel_calls_per_s": round(per_worker * in_flight / parallel_total, 1),
    }), flush=True)


async def main():
    calls, in_flight, url, program = arguments()
    if url is not None:
        async with streamablehttp_client(url) as (read, write, _):
            async with ClientSession(read, write) as session:
                await measure(session, calls, in_flight)
    else:
        server = StdioServerParameters(command=program[0], args=program[1:])
        async with stdio_client(server) as (read, write):
            async with ClientSession(read, write) as session:
                await measure(session, calls, in_flight)


asyncio.run(main())
