"""OAuth for HTTP MCP servers (docs/configuration.md, "MCP servers behind OAuth"): the SDK's
providers as a fleet uses them, where their tokens live, and signing in."""

from .kv_store import BUCKET, KvTokenStore
from .providers import Fleet, LoginOAuth, WorkerOAuth, refused
from .server_auth import CLIENT_NAME, ServerAuth, TokenPlace, package_version
from .storage import ServerTokens, tokens_of, wanted_scope
from .stores import FileTokenStore, TokenStore, TokenStoreError

__all__ = [
    "BUCKET",
    "CLIENT_NAME",
    "FileTokenStore",
    "Fleet",
    "KvTokenStore",
    "LoginOAuth",
    "ServerAuth",
    "ServerTokens",
    "TokenPlace",
    "TokenStore",
    "TokenStoreError",
    "WorkerOAuth",
    "package_version",
    "refused",
    "tokens_of",
    "wanted_scope",
]
