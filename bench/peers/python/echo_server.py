"""The Python SDK's echo server for `cargo xtask bench --peers`, written as its docs show.

`echo_server.py` serves over stdio; `echo_server.py http PORT` over Streamable HTTP at
`http://127.0.0.1:PORT/mcp`.
"""

import sys

from mcp.server.fastmcp import FastMCP

http = len(sys.argv) == 3 and sys.argv[1] == "http"
server = FastMCP("python-echo", port=int(sys.argv[2]) if http else 8000, log_level="WARNING")


@server.tool()
def echo(message: str) -> str:
    """Answers its message."""
    return message


server.run(transport="streamable-http" if http else "stdio")
