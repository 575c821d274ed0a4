"""What mcp/auth/providers.py takes of the SDK beyond its public API, held to the pinned version: the
private steps it overrides or relies on, and the order of the SDK's flow around them. The
behaviour over them (the refresh lease, tokens taken up, no sign-in without a person) is in
test_mcp_oauth.py and tests/bus/test_bus_mcp_oauth.py, against the real SDK."""

import inspect
from importlib.metadata import version

from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.oauth2 import OAuthContext


def test_the_sdk_is_the_minor_version_the_providers_were_written_against() -> None:
    assert version("mcp").split(".")[:2] == ["2", "3"]


def test_the_private_steps_the_providers_use_are_there() -> None:
    for step in (
        "_initialize",
        "_refresh_token",
        "_handle_refresh_response",
        "_perform_authorization",
    ):
        assert inspect.iscoroutinefunction(getattr(OAuthClientProvider, step)), step
    assert inspect.isasyncgenfunction(OAuthClientProvider._auth_flow)
    fields = OAuthContext.__dataclass_fields__
    for name in (
        "current_tokens",
        "token_expiry_time",
        "oauth_metadata",
        "protected_resource_metadata",
        "auth_server_url",
    ):
        assert name in fields, name


def test_the_sdk_loads_its_storage_then_refreshes_before_it_sends() -> None:
    """The lease is taken before the flow: it relies on the flow loading its storage only when
    `_initialized` is false, and refreshing with what it holds before the request goes out."""
    flow = inspect.getsource(OAuthClientProvider._auth_flow)
    load = flow.index("if not self._initialized:")
    refresh = flow.index("await self._refresh_token()")
    send = flow.index("response = yield request")
    assert load < refresh < send
    assert "self._initialized = True" in inspect.getsource(
        OAuthClientProvider._initialize
    )
