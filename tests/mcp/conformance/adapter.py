"""The client the official MCP conformance suite starts for each scenario: a hand-over.

`conformance client --command "python -I -S adapter.py"` runs this with the scenario's MCP server URL
as its argument and, for auth scenarios, the scenario's context as JSON in `MCP_CONFORMANCE_CONTEXT`.
It sends both, with the scenario's name, as one JSON line to the test's process at
`CONFORMANCE_ADAPTER` (`HOST:PORT`), where the worker, its MCP client and `mcp login` are already
imported (tests/mcp/conformance_adapter.py), and exits with the status it gets back. The standard
library alone: it starts in a few tens of milliseconds, where importing the worker takes seconds.
"""

import json
import os
import socket
import sys


def main() -> int:
    host, _, port = os.environ["CONFORMANCE_ADAPTER"].rpartition(":")
    asked = {
        "url": sys.argv[1],
        "scenario": os.environ.get("MCP_CONFORMANCE_SCENARIO", ""),
        "context": json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}"),
    }
    with socket.create_connection((host, int(port))) as connection:
        connection.sendall(json.dumps(asked).encode() + b"\n")
        answer = connection.makefile("rb").readline()
    # No answer: the test's process went away, and the scenario fails.
    return int(json.loads(answer)["exit"]) if answer else 1


if __name__ == "__main__":
    sys.exit(main())
