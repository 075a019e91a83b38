"""The client side of scripts/bench-peers: the official MCP Python SDK calling the `echo` tool of
one upstream directly over stdio and through each proxy over Streamable HTTP, in alternation.

Usage: python bench-peers-client.py <calls> <direct command...> -- <name>=<url>[=ping] ...

A path whose entry ends in `=ping` sends the MCP `ping` request instead of calling `echo`: the
cheapest request a server answers, which no proxy forwards upstream, so it times the HTTP
exchange and the server's own MCP handling alone.

Every path gets one session, opened before the timing starts and kept for the whole run. The
calls are made in blocks of ten, one path after another, the order of the paths rotating from
block to block, so that every path sees the same machine noise. Prints one line per path: p50,
mean and p90 of the call time, and the added p50 and mean against the direct call. A second
direct path writes the same call to the upstream as one JSON line and reads its answer with no
SDK in between: the upstream's own time plus two pipe crossings.
"""

import asyncio
import contextlib
import json
import statistics
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

BLOCK = 10
WARMUP = 30
ARGUMENTS = {"message": "hello"}


async def echo_tool(session):
    """The exposed name of the upstream's `echo` tool (proxies add their own prefix)."""
    tools = await session.list_tools()
    names = [tool.name for tool in tools.tools]
    for name in names:
        if name == "echo" or name.endswith(("_echo", "/echo", ".echo", "__echo")):
            return name
    raise SystemExit(f"no echo tool among {names}")


async def call(session, tool):
    started = time.perf_counter_ns()
    result = await session.call_tool(tool, ARGUMENTS)
    elapsed = time.perf_counter_ns() - started
    if result.isError:
        raise SystemExit(f"{tool} failed: {result.content}")
    text = result.content[0].text if result.content else ""
    if "hello" not in text:
        raise SystemExit(f"{tool} answered {text!r}")
    return elapsed / 1000.0


async def ping(session, _tool):
    started = time.perf_counter_ns()
    await session.send_ping()
    return (time.perf_counter_ns() - started) / 1000.0


class RawStdio:
    """The upstream over stdio with no SDK: one JSON line written, lines read until the answer.

    It times the upstream's own answer plus two pipe crossings, the floor of any stdio hop.
    """

    def __init__(self, process):
        self.process = process
        self.next_id = 0

    @classmethod
    async def start(cls, command):
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            limit=1 << 24,
        )
        raw = cls(process)
        await raw.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench-peers", "version": "1.0.0"},
            },
        )
        raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return raw

    def send(self, message):
        self.process.stdin.write(json.dumps(message).encode() + b"\n")

    async def request(self, method, params):
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        await self.process.stdin.drain()
        while True:
            message = json.loads(await self.process.stdout.readline())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise SystemExit(f"{method} failed: {message['error']}")
                return message["result"]

    def close(self):
        self.process.kill()


async def raw_call(raw, tool):
    started = time.perf_counter_ns()
    result = await raw.request("tools/call", {"name": tool, "arguments": ARGUMENTS})
    elapsed = time.perf_counter_ns() - started
    if result.get("isError") or "hello" not in result["content"][0]["text"]:
        raise SystemExit(f"{tool} answered {result!r}")
    return elapsed / 1000.0


async def main():
    args = sys.argv[1:]
    calls = int(args[0])
    split = args.index("--")
    direct = args[1:split]
    proxies = [entry.split("=", 2) for entry in args[split + 1 :]]
    async with contextlib.AsyncExitStack() as stack:
        paths = []
        params = StdioServerParameters(command=direct[0], args=direct[1:])
        read, write = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        paths.append(("direct (stdio)", session))
        kinds = [call]
        raw = await RawStdio.start(direct)
        stack.callback(raw.close)
        paths.append(("direct (stdio, raw lines)", raw))
        kinds.append(raw_call)
        for name, url, *mode in proxies:
            read, write, _ = await stack.enter_async_context(streamable_http_client(url))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            paths.append((name, session))
            kinds.append(ping if mode == ["ping"] else call)
        tools = [
            "(ping)" if kind is ping else "echo" if kind is raw_call else await echo_tool(session)
            for (_, session), kind in zip(paths, kinds)
        ]
        for (_, session), tool, kind in zip(paths, tools, kinds):
            for _ in range(WARMUP):
                await kind(session, tool)
        times = [[] for _ in paths]
        block = 0
        while len(times[0]) < calls:
            order = list(range(len(paths)))
            shift = block % len(paths)
            order = order[shift:] + order[:shift]
            for index in order:
                session = paths[index][1]
                kind = kinds[index]
                for _ in range(min(BLOCK, calls - len(times[index]))):
                    times[index].append(await kind(session, tools[index]))
            block += 1
        direct_p50 = statistics.median(times[0])
        direct_mean = statistics.fmean(times[0])
        print(f"{'path':<28} {'tool':<18} {'calls':>5} {'p50 us':>8} {'mean us':>8} {'p90 us':>8} {'added p50':>10} {'added mean':>10}")
        for (name, _), tool, measured in zip(paths, tools, times):
            p50 = statistics.median(measured)
            mean = statistics.fmean(measured)
            p90 = statistics.quantiles(measured, n=10)[-1]
            print(
                f"{name:<28} {tool:<18} {len(measured):>5} {p50:>8.0f} {mean:>8.0f} {p90:>8.0f}"
                f" {p50 - direct_p50:>+10.0f} {mean - direct_mean:>+10.0f}"
            )


if __name__ == "__main__":
    asyncio.run(main())
