"""The command line: `interaction-worker COMMAND` (docs/cli.md).

    run             serve a worker (an embedded nats-server when no URL is configured)
    call            send one tool call; print the result, then the observation
    tools           list the tools the serving worker offers
    mcp discover    list the tools of one MCP server or all
    mcp invoke      call one MCP tool
    mcp login       sign in to an MCP server behind OAuth
    mcp logout      forget (and revoke) an MCP server's tokens
    mcp status      each MCP server's sign-in state
    mcp-serve       the fleet's tools as an MCP server (stdio or streamable HTTP)
    deliver         send one delivery; print the receipt
    command         send one command of the served command protocol, or print its catalog
    react           a ReAct flow: a model acts through the serving worker
    record          record the bus traffic to a file, for replay in tests
    replay          publish a recording's events again, or send its requests and compare
    console         serve the operator console, a web page of the bus
    schema          the JSON Schemas and the AsyncAPI document
    check-config    validate a configuration and print the effective one

`interaction-worker --version` prints the version. Output is JSON, one object per line (a table for
`tools` on a terminal). Exit codes: 0 success; 1 a failed call (an error reply, or a result or
receipt whose status is not success/accepted), a differing replay, or no server; 2 bad usage or
configuration; 130 interrupted (Ctrl-C); 141 when the reader of stdout went away. Errors are one
line on stderr, without a traceback unless `--debug`.
"""

from .main import main

__all__ = ["main"]
