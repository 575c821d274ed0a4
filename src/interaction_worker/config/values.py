"""Reading the configuration file: one section at a time, typed values, every problem collected.

A getter that meets a bad value records one line naming the key (never the value, which may be a
secret pasted in the wrong place) and returns the default, so one run reports every problem.
"""

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import urlsplit

from ..errors import ConfigurationError

T = TypeVar("T")

DURATION_RULE = "must be a duration such as 500ms, 30s or 24h"
# int64 nanoseconds (JetStream's unit) hold about 2.5 million hours; stay well inside.
MAX_DURATION_HOURS = 100_000
_DURATION = re.compile(r"(\d{1,15}(?:\.\d{1,15})?)(ms|s|m|h|d)")
_UNIT_SECONDS = {
    "ms": Decimal("0.001"),
    "s": Decimal(1),
    "m": Decimal(60),
    "h": Decimal(3600),
    "d": Decimal(86400),
}
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")
_MISSING: Any = object()

NAME_CHARS = re.compile(r"[A-Za-z0-9_-]+")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


@dataclass(frozen=True)
class Rule:
    """What a value should have been: the end of a problem line after the key."""

    text: str


def parse_duration(value: object) -> float | Rule:
    """Seconds, or the rule the value breaks: the one grammar of durations, in the file and on the
    command line (docs/configuration.md)."""
    match = _DURATION.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return Rule(DURATION_RULE)
    seconds = Decimal(match[1]) * _UNIT_SECONDS[match[2]]
    if seconds <= 0:
        return Rule("must be a positive duration such as 500ms, 30s or 24h")
    if seconds > MAX_DURATION_HOURS * 3600:
        return Rule(f"must be a duration of at most {MAX_DURATION_HOURS}h")
    return float(seconds)


def format_duration(seconds: float) -> str:
    """The shortest string `parse_duration` reads back as exactly `seconds`."""
    exact = Decimal(repr(seconds))
    millis = exact * 1000
    if millis == millis.to_integral_value():
        whole = int(millis)
        for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
            if whole % size == 0:
                return f"{whole // size}{unit}"
        return f"{whole}ms"
    return f"{exact:f}s"


def join(path: str, key: object) -> str:
    """`path.key`, quoting a key that is not a plain name so the line stays unambiguous."""
    if isinstance(key, str) and _PLAIN_KEY.fullmatch(key):
        text = key
    else:
        text = json.dumps(key, default=str, ensure_ascii=False)
    return f"{path}.{text}" if path else text


def is_subject(value: str, *, placeholder: bool = False) -> bool:
    """Dot-separated nonempty tokens without wildcards or whitespace; `{key}` allowed if asked."""
    if placeholder:
        value = value.replace("{key}", "k")
    if not value or any(c.isspace() or c in "*>{}" or ord(c) < 32 for c in value):
        return False
    return all(value.split("."))


def is_stream_name(value: str) -> bool:
    return len(value) <= 255 and NAME_CHARS.fullmatch(value) is not None


def url_problem(value: str, schemes: Sequence[str], example: str) -> str | None:
    """The rule a URL breaks (`schemes`, a host, a valid port, no credentials), or None."""
    rule = f"must be a URL such as {example}"
    if any(c.isspace() or ord(c) < 32 for c in value):
        return rule
    try:
        parts = urlsplit(value)
        _ = parts.port
    except ValueError:
        return rule
    if parts.scheme not in schemes or not parts.hostname:
        return rule
    if parts.username is not None or parts.password is not None:
        return "must not contain credentials (they come from the environment)"
    return None


class Problems:
    """The lines of one ConfigurationError."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, key: str, rule: str) -> None:
        self.lines.append(f"{key} {rule}")

    def raise_if_any(self) -> None:
        if self.lines:
            raise ConfigurationError("\n".join(self.lines))


class Section:
    """One mapping of the file. Leaving the `with` block reports the keys no getter asked for."""

    def __init__(self, data: Mapping[Any, Any], where: str, problems: Problems) -> None:
        self.data = data
        self.where = where
        self.problems = problems
        self._seen: set[object] = set()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            for key in self.data:
                if key not in self._seen:
                    self.problems.lines.append(f"unknown key: {join(self.where, key)}")

    def key(self, name: str) -> str:
        return join(self.where, name)

    def has(self, name: str) -> bool:
        return name in self.data

    def raw(self, name: str) -> Any:
        self._seen.add(name)
        return self.data.get(name, _MISSING)

    def ignore(self, name: str) -> None:
        """Mark a key as handled elsewhere (or reported by the caller with a better message)."""
        self._seen.add(name)

    def fail(self, name: str, rule: str) -> None:
        self.problems.add(self.key(name), rule)

    def section(self, name: str) -> "Section":
        """A nested mapping; null and absent are an empty one, anything else is a problem."""
        return mapping(self.raw(name), self.key(name), self.problems)

    def get(self, name: str, default: T, convert: Callable[[Any], T | Rule]) -> T:
        """Run `convert` (the value, or the Rule it breaks) on a present key."""
        value = self.raw(name)
        if value is _MISSING:
            return default
        result = convert(value)
        if isinstance(result, Rule):
            self.fail(name, result.text)
            return default
        return result

    def integer(
        self, name: str, default: int, low: int = 1, high: int | None = None
    ) -> int:
        rule = Rule(
            "must be a positive integer"
            if high is None
            else f"must be an integer from {low} to {high}"
        )

        def convert(value: Any) -> int | Rule:
            if (
                type(value) is not int
                or value < low
                or (high is not None and value > high)
            ):
                return rule
            return value

        return self.get(name, default, convert)

    def duration(self, name: str, default: float) -> float:
        return self.get(name, default, parse_duration)

    def boolean(self, name: str, default: bool) -> bool:
        rule = Rule("must be true or false")
        return self.get(name, default, lambda v: v if isinstance(v, bool) else rule)

    def string(
        self, name: str, default: str, valid: Callable[[str], bool], rule: str
    ) -> str:
        broken = Rule(rule)
        return self.get(
            name, default, lambda v: v if isinstance(v, str) and valid(v) else broken
        )

    def optional_string(
        self, name: str, valid: Callable[[str], bool], rule: str
    ) -> str | None:
        """A string or null; absent is null."""
        broken = Rule(rule)
        return self.get(
            name,
            None,
            lambda v: v if v is None or (isinstance(v, str) and valid(v)) else broken,
        )

    def choice(self, name: str, default: str, options: Sequence[str]) -> str:
        rule = Rule(f"must be one of {', '.join(options)}")
        return self.get(
            name, default, lambda v: v if isinstance(v, str) and v in options else rule
        )

    def path(self, name: str, default: Path, base_dir: Path) -> Path:
        return self.get(name, default, lambda v: resolve_path(v, base_dir))

    def names(
        self,
        name: str,
        default: tuple[str, ...],
        valid: Callable[[str], bool],
        rule: str,
        *,
        list_rule: str = "must be a list of names",
    ) -> tuple[str, ...]:
        """A list of strings, each checked; a repeated entry is a problem too."""
        value = self.raw(name)
        if value is _MISSING:
            return default
        if not isinstance(value, list):
            self.fail(name, list_rule)
            return default
        found: list[str] = []
        for index, item in enumerate(value):
            key = f"{self.key(name)}[{index}]"
            if not isinstance(item, str) or not valid(item):
                self.problems.add(key, rule)
            elif item in found:
                self.problems.add(
                    key, f"repeats {json.dumps(item, ensure_ascii=False)}"
                )
            else:
                found.append(item)
        return tuple(found)


def mapping(value: object, path: str, problems: Problems) -> Section:
    if value is _MISSING or value is None:
        return Section({}, path, problems)
    if not isinstance(value, dict):
        problems.add(path, "must be a mapping")
        return Section({}, path, problems)
    return Section(value, path, problems)


def resolve_path(value: object, base_dir: Path) -> Path | Rule:
    if not isinstance(value, str) or not value or "\0" in value:
        return Rule("must be a path (a nonempty string)")
    return (base_dir / value).resolve()


def is_name(value: str) -> bool:
    """A nonblank string of 1 to 256 characters (sink and MCP server names)."""
    return 0 < len(value) <= 256 and bool(value.strip()) and value == value.strip()


LISTEN_RULE = (
    "must be HOST:PORT such as 127.0.0.1:9464 (port 0: any free port), or null"
)
_LISTEN = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})")


def listen_address(value: object) -> tuple[str, int] | Rule:
    """`HOST:PORT` as (host, port): a host name, an IPv4 address or a bracketed IPv6 one (given
    without its brackets), and a port from 0 (any free one) to 65535."""
    match = _LISTEN.fullmatch(value) if isinstance(value, str) else None
    if match is None or int(match[2]) > 65535:
        return Rule(LISTEN_RULE)
    return match[1].strip("[]"), int(match[2])
