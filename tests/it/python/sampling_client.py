"""An MCP Python SDK client whose model answers orca's sampling requests from a script.

argv[1] is JSON: {"command", "args", "env", "cwd", "answers"}; an answer of null declines.
Prints {"result": <the generate_sql result>, "asked": [<each sampling request's params>]}.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client


async def main() -> None:
    spec = json.loads(sys.argv[1])
    answers = list(spec["answers"])
    asked = []

    async def sampling(context, params):
        asked.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        answer = answers.pop(0) if answers else None
        if answer is None:
            return types.ErrorData(code=-1, message="the user declined")
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=answer),
            model="python-model-3",
        )

    server = StdioServerParameters(
        command=spec["command"], args=spec["args"], env=spec["env"], cwd=spec["cwd"]
    )
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, sampling_callback=sampling) as session:
            await session.initialize()
            result = await session.call_tool("generate_sql", {"prompt": "how many invoices?"})
            dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
            print(json.dumps({"result": dumped, "asked": asked}))


asyncio.run(main())
