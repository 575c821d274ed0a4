"""The option tables of docs/cli.md, rendered from the parser: what the docs must say, word for word."""

import argparse

from interaction_worker.cli.main import HANDLERS
from interaction_worker.cli.parser import build_parser


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every command a user runs, by its words (`mcp discover`), in the parser's order."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs and words:
            found[" ".join(words)] = parser
        for action in subs:
            for name, sub in action.choices.items():
                walk(sub, (*words, name))

    walk(build_parser(HANDLERS), ())
    return found


def _cell(action: argparse.Action) -> str:
    if not action.option_strings:
        name = str(action.metavar or action.dest).upper()
        return f"`{name}…`" if action.nargs in ("*", "+") else f"`{name}`"
    names = ", ".join(action.option_strings)
    if action.nargs == 0:
        return f"`{names}`"
    metavar = action.metavar or action.dest.upper()
    return f"`{names} {metavar}`"


def option_table(parser: argparse.ArgumentParser) -> str:
    rows = ["| argument or option | meaning |", "|---|---|"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        about = (action.help or "").replace("|", "\\|")
        rows.append(f"| {_cell(action)} | {about} |")
    return "\n".join(rows)


def render() -> str:
    """Each command's heading, description and table, as docs/cli.md holds them."""
    parts = []
    for words, parser in commands().items():
        parts.append(
            f"### `interaction-worker {words}`\n\n{parser.description}\n\n{option_table(parser)}\n"
        )
    return "\n".join(parts)
