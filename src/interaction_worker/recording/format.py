"""The recording file (replay.md 1): JSON Lines, a header line, then one line per message.

Writing is one line per call, so a recorder cut between two calls leaves a valid file; reading checks
the whole file before anything uses it, and the first fault is one error naming the file and line.
"""

import base64
import binascii
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

FORMAT = "interaction-recording"
VERSION = 1

HeaderValue = str | list[str]


@dataclass(frozen=True, slots=True)
class RecordingHeader:
    """The first line: what was recorded, from where, by what."""

    prefix: str
    started_at: str
    subjects: tuple[str, ...]
    recorder: str

    def to_wire(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "prefix": self.prefix,
            "startedAt": self.started_at,
            "subjects": list(self.subjects),
            "recorder": self.recorder,
        }


@dataclass(frozen=True, slots=True)
class RecordedMessage:
    """One message as the recorder received it; `data` holds its exact bytes."""

    seq: int
    at: str
    subject: str
    data: bytes
    headers: Mapping[str, HeaderValue] | None = None
    reply: bool = False

    def to_wire(self) -> dict[str, Any]:
        line: dict[str, Any] = {"seq": self.seq, "at": self.at, "subject": self.subject}
        if self.reply:
            line["reply"] = True
        if self.headers:
            line["headers"] = dict(self.headers)
        try:
            line["body"] = self.data.decode("utf-8")
        except UnicodeDecodeError:
            line["body_b64"] = base64.b64encode(self.data).decode("ascii")
        return line

    def single_headers(self) -> dict[str, str] | None:
        """The headers as one value each, as a NATS client sends them: a repeated header's values
        joined by `, ` (HTTP's rule for repeated fields)."""
        if not self.headers:
            return None
        return {
            name: value if isinstance(value, str) else ", ".join(value)
            for name, value in self.headers.items()
        }


@dataclass(frozen=True, slots=True)
class Recording:
    """A whole recording, checked."""

    header: RecordingHeader
    messages: Sequence[RecordedMessage] = field(default_factory=tuple)
    name: str = "<recording>"


class RecordingError(Exception):
    """A recording that cannot be used: the file, the line (1-based) and what is wrong."""

    def __init__(self, name: str, line: int | None, reason: str) -> None:
        where = f"{name}:{line}" if line is not None else name
        super().__init__(f"{where}: {reason}")
        self.name = name
        self.line = line
        self.reason = reason


def encode_line(document: Mapping[str, Any]) -> bytes:
    """One line of the file: compact JSON, non-ASCII kept as UTF-8, `\\n` at the end.

    Line separators (U+2028/U+2029) are escaped by `json` only with ensure_ascii, so they are
    written as UTF-8: a JSON Lines reader splits on `\\n` alone."""
    return (
        json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n"
    ).encode("utf-8")


def utc_timestamp(seconds: float) -> str:
    """RFC 3339 in UTC to the millisecond, as `at` and `startedAt` are written."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def read_recording(path: Path) -> Recording:
    """Read and check a whole file.

    Raises:
        RecordingError: the file cannot be read, or its first bad line.
    """
    name = str(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise RecordingError(name, None, error.strerror or "cannot be read") from None
    return parse_recording(data.split(b"\n"), name)


def parse_recording(lines: Iterable[bytes], name: str = "<recording>") -> Recording:
    """Check every line; a last line without its `\\n` is read like the others."""
    header: RecordingHeader | None = None
    messages: list[RecordedMessage] = []
    number = 0
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            if raw:  # a line of blanks: an editor's doing, still not a message
                raise RecordingError(name, number, "blank line")
            continue
        document = _json_object(raw, name, number)
        if header is None:
            header = _header(document, name, number)
            continue
        messages.append(_message(document, len(messages) + 1, name, number))
    if header is None:
        raise RecordingError(name, number or 1, "empty file: no header line")
    return Recording(header, tuple(messages), name)


def _json_object(raw: bytes, name: str, number: int) -> dict[str, Any]:
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        reason = error.msg if isinstance(error, json.JSONDecodeError) else "not UTF-8"
        raise RecordingError(name, number, f"not valid JSON ({reason})") from None
    if not isinstance(document, dict):
        raise RecordingError(name, number, "not a JSON object")
    return document


def _header(document: Mapping[str, Any], name: str, number: int) -> RecordingHeader:
    if document.get("format") != FORMAT:
        found = document.get("format")
        if found is None:
            raise RecordingError(
                name, number, f'no "format": the first line must be the {FORMAT} header'
            )
        raise RecordingError(name, number, f"unknown format {found!r}")
    version = document.get("version")
    if version != VERSION or isinstance(version, bool):
        if version is None:
            raise RecordingError(name, number, 'no "version" in the header')
        raise RecordingError(
            name, number, f"unknown version {version!r} (this reader knows {VERSION})"
        )
    prefix = document.get("prefix")
    if not isinstance(prefix, str) or not prefix:
        raise RecordingError(name, number, '"prefix" must be a nonempty string')
    subjects = document.get("subjects", [])
    if not isinstance(subjects, list) or not all(isinstance(s, str) for s in subjects):
        raise RecordingError(name, number, '"subjects" must be a list of strings')
    return RecordingHeader(
        prefix=prefix,
        started_at=str(document.get("startedAt", "")),
        subjects=tuple(subjects),
        recorder=str(document.get("recorder", "")),
    )


def _message(
    document: Mapping[str, Any], expected: int, name: str, number: int
) -> RecordedMessage:
    seq = document.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool):
        raise RecordingError(name, number, '"seq" must be an integer')
    if seq != expected:
        raise RecordingError(
            name, number, f"seq {seq} where {expected} was expected (a gap or a repeat)"
        )
    subject = document.get("subject")
    if not isinstance(subject, str) or not subject:
        raise RecordingError(name, number, '"subject" must be a nonempty string')
    at = document.get("at", "")
    if not isinstance(at, str):
        raise RecordingError(name, number, '"at" must be a string')
    reply = document.get("reply", False)
    if not isinstance(reply, bool):
        raise RecordingError(name, number, '"reply" must be true or false')
    return RecordedMessage(
        seq=seq,
        at=at,
        subject=subject,
        data=_body(document, name, number),
        headers=_headers(document.get("headers"), name, number),
        reply=reply,
    )


def _body(document: Mapping[str, Any], name: str, number: int) -> bytes:
    if "body" in document:
        body = document["body"]
        if not isinstance(body, str):
            raise RecordingError(name, number, '"body" must be a string')
        try:
            return body.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate written as \ud800
            raise RecordingError(name, number, '"body" is not valid UTF-8') from None
    if "body_b64" in document:
        encoded = document["body_b64"]
        if not isinstance(encoded, str):
            raise RecordingError(name, number, '"body_b64" must be a string')
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise RecordingError(
                name, number, '"body_b64" is not valid base64'
            ) from None
    raise RecordingError(name, number, 'neither "body" nor "body_b64"')


def _headers(value: object, name: str, number: int) -> dict[str, HeaderValue] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RecordingError(name, number, '"headers" must be an object')
    headers: dict[str, HeaderValue] = {}
    for header, content in value.items():
        if isinstance(content, str):
            headers[header] = content
        elif (
            isinstance(content, list)
            and content
            and all(isinstance(v, str) for v in content)
        ):
            headers[header] = list(content)
        else:
            raise RecordingError(
                name,
                number,
                f"header {header!r} must be a string or a list of strings",
            )
    return headers
