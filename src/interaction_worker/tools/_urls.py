"""http(s) URLs as the WHATWG parser (JavaScript's `new URL`) serialises them, for web search results
and provider origins: scheme and host lowercased, an IDN host in punycode, the default port dropped,
an empty path `/`, and characters outside ASCII or unsafe in a URL percent-encoded.

Stricter than WHATWG on rare forms: a backslash, a host-less special URL (`https:example.com`) or a
forbidden host character makes the URL invalid rather than being repaired.
"""

import re
from typing import NamedTuple
from urllib.parse import quote, urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}
_C0_AND_SPACE = "".join(chr(c) for c in range(0x21))
_TAB_OR_NEWLINE = re.compile("[\t\n\r]")
_FORBIDDEN_HOST = re.compile(r"[\x00-\x20\x7f#%/:<>?@\[\\\]^|]")
# Printable ASCII that WHATWG leaves as it is in a path, query or fragment (plus `%` escapes).
_SAFE = "!$%&'()*+,-./:;=?@_~[]|^"


class WebUrl(NamedTuple):
    scheme: str
    host: str  # IPv6 in brackets
    port: int | None  # None for the scheme's default
    path: str
    query: str | None
    fragment: str | None

    @property
    def origin(self) -> str:
        port = "" if self.port is None else f":{self.port}"
        return f"{self.scheme}://{self.host}{port}"

    @property
    def href(self) -> str:
        query = "" if self.query is None else f"?{self.query}"
        fragment = "" if self.fragment is None else f"#{self.fragment}"
        return f"{self.origin}{self.path}{query}{fragment}"


def parse_web_url(value: str) -> WebUrl | None:
    """An http(s) URL without user information, or None."""
    value = _TAB_OR_NEWLINE.sub("", value.strip(_C0_AND_SPACE))
    if "\\" in value:
        return None
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or parts.username or parts.password:
        return None
    host = _host(parts.hostname or "")
    if host is None:
        return None
    has_query = "?" in value.partition("#")[0]
    return WebUrl(
        scheme,
        host,
        None if port == _DEFAULT_PORTS[scheme] else port,
        quote(parts.path, safe=_SAFE) or "/",
        quote(parts.query, safe=_SAFE) if has_query else None,
        quote(parts.fragment, safe=_SAFE + "#") if "#" in value else None,
    )


def _host(hostname: str) -> str | None:
    if not hostname:
        return None
    if ":" in hostname:  # an IPv6 literal, which urlsplit took out of its brackets
        return f"[{hostname}]" if re.fullmatch(r"[0-9a-f:.]+", hostname) else None
    if not hostname.isascii():
        try:
            hostname = hostname.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    if _FORBIDDEN_HOST.search(hostname):
        return None
    return hostname.lower()
