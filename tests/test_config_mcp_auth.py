"""The `auth:` block of an HTTP MCP server (docs/configuration.md, MCP servers behind OAuth)."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from interaction_worker.app import mcp_credential_files
from interaction_worker.config import parse_settings
from interaction_worker.config.model import McpAuthSettings
from interaction_worker.errors import ConfigurationError

URL = "https://mcp.example.com/mcp"


def auth_of(auth: Any) -> McpAuthSettings | None:
    settings = parse_settings(
        {"mcp": {"servers": {"s": {"transport": "http", "url": URL, "auth": auth}}}},
        base_dir=Path("/srv"),
    )
    return settings.mcp.servers["s"].auth


def problems(auth: Any, **server: Any) -> list[str]:
    spec = {"transport": "http", "url": URL, "auth": auth, **server}
    with pytest.raises(ConfigurationError) as caught:
        parse_settings({"mcp": {"servers": {"s": spec}}}, base_dir=Path("/srv"))
    return str(caught.value).splitlines()


def test_an_oauth_server_takes_the_documented_defaults() -> None:
    assert auth_of({"type": "oauth"}) == McpAuthSettings(type="oauth")
    assert auth_of(None) is None


def test_a_client_credentials_server_with_a_key_file_signs_its_assertion() -> None:
    auth = auth_of(
        {
            "type": "client_credentials",
            "client_id_env": "ID",
            "private_key_file": "k.pem",
        }
    )
    assert auth == McpAuthSettings(
        type="client_credentials",
        client_id_env="ID",
        token_endpoint_auth="private_key_jwt",
        private_key_file=Path("/srv/k.pem"),
    )


@pytest.mark.parametrize(
    ("auth", "message"),
    [
        pytest.param(
            {},
            "mcp.servers.s.auth.type must be one of oauth, client_credentials",
            id="no-type",
        ),
        pytest.param(
            {"type": "oauth", "client_secret_env": "S"},
            "mcp.servers.s.auth.client_secret_env needs client_id_env (a pre-registered client)",
            id="secret-without-id",
        ),
        pytest.param(
            {"type": "oauth", "redirect": "0.0.0.0:8080"},
            "mcp.servers.s.auth.redirect must be a loopback HOST:PORT such as 127.0.0.1:0 "
            "(port 0: any free one)",
            id="redirect-not-loopback",
        ),
        pytest.param(
            {"type": "oauth", "client_metadata_url": "http://example.com/c.json"},
            "mcp.servers.s.auth.client_metadata_url must be an https URL with a path, "
            "such as https://example.com/client.json",
            id="cimd-not-https",
        ),
        pytest.param(
            {"type": "oauth", "issuer": "https://a.example"},
            "mcp.servers.s.auth.issuer is not used by type oauth",
            id="issuer-for-oauth",
        ),
        pytest.param(
            {"type": "client_credentials", "client_id_env": "ID"},
            "mcp.servers.s.auth.client_secret_env is required for client_secret_basic",
            id="no-secret",
        ),
        pytest.param(
            {
                "type": "client_credentials",
                "client_id_env": "ID",
                "token_endpoint_auth": "private_key_jwt",
            },
            "mcp.servers.s.auth.private_key_file is required for private_key_jwt",
            id="jwt-without-key",
        ),
        pytest.param(
            {
                "type": "client_credentials",
                "client_id_env": "ID",
                "client_secret_env": "S",
                "signing_algorithm": "ES256",
            },
            "mcp.servers.s.auth.signing_algorithm is used by private_key_jwt only",
            id="algorithm-without-jwt",
        ),
        pytest.param(
            {
                "type": "client_credentials",
                "client_id_env": "ID",
                "client_secret_env": "S",
                "scopes": ["a b"],
            },
            "mcp.servers.s.auth.scopes must be a list of scopes (nonempty strings without spaces), or null",
            id="scope-with-space",
        ),
        pytest.param(
            {
                "type": "client_credentials",
                "client_id_env": "ID",
                "client_secret_env": "a secret",
            },
            "mcp.servers.s.auth.client_secret_env must be an environment variable name",
            id="secret-not-a-name",
        ),
    ],
)
def test_each_problem_of_an_auth_block_is_one_line_naming_its_key(
    auth: dict[str, Any], message: str
) -> None:
    assert problems(auth) == [message]


def test_static_authorization_beside_auth_is_refused() -> None:
    assert problems({"type": "oauth"}, headers_env={"authorization": "TOKEN"}) == [
        "mcp.servers.s.headers_env must not set Authorization beside auth"
    ]


def test_auth_is_refused_for_a_stdio_server() -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_settings(
            {
                "mcp": {
                    "servers": {
                        "s": {
                            "transport": "stdio",
                            "command": "x",
                            "auth": {"type": "oauth"},
                        }
                    }
                }
            },
            base_dir=Path("/srv"),
        )
    assert str(caught.value) == "mcp.servers.s.auth is not used by transport stdio"


def test_check_config_shows_the_variables_names_never_their_values() -> None:
    settings = parse_settings(
        {
            "mcp": {
                "servers": {
                    "s": {
                        "transport": "http",
                        "url": URL,
                        "auth": {
                            "type": "client_credentials",
                            "client_id_env": "ID",
                            "client_secret_env": "SECRET",
                        },
                    }
                }
            }
        },
        base_dir=Path("/srv"),
    )
    assert settings.effective()["mcp"]["servers"]["s"]["auth"] == {
        "type": "client_credentials",
        "client_id_env": "ID",
        "client_secret_env": "SECRET",
        "private_key_file": None,
        "signing_algorithm": None,
        "issuer": None,
        "token_endpoint_auth": "client_secret_basic",
        "scopes": None,
    }


def test_the_credential_files_are_the_token_directory_and_the_key_files(
    tmp_path: Path,
) -> None:
    servers = {
        "a": {"transport": "http", "url": URL, "auth": {"type": "oauth"}},
        "b": {
            "transport": "http",
            "url": URL,
            "auth": {
                "type": "client_credentials",
                "client_id_env": "ID",
                "private_key_file": "k.pem",
            },
        },
    }
    embedded = parse_settings({"mcp": {"servers": servers}}, base_dir=tmp_path)
    assert mcp_credential_files(embedded) == [
        tmp_path / ".interaction" / "mcp-auth",
        tmp_path / "k.pem",
    ]
    fleet = parse_settings(
        {"nats": {"url": "nats://n:4222"}, "mcp": {"servers": servers}},
        base_dir=tmp_path,
    )
    assert mcp_credential_files(fleet) == [
        tmp_path / "k.pem"
    ]  # the tokens are in the bucket


def test_the_effective_auth_blocks_parse_back_to_the_same_settings(
    tmp_path: Path,
) -> None:
    servers = {
        "a": {
            "transport": "http",
            "url": URL,
            "auth": {"type": "oauth", "client_id_env": "ID", "scopes": ["read"]},
        },
        "b": {
            "transport": "http",
            "url": URL,
            "auth": {
                "type": "client_credentials",
                "client_id_env": "ID",
                "private_key_file": "k.pem",
                "signing_algorithm": "ES256",
                "issuer": "https://auth.example.com",
            },
        },
    }
    settings = parse_settings({"mcp": {"servers": servers}}, base_dir=tmp_path)
    assert (
        parse_settings(settings.effective(), base_dir=Path("/other")).mcp
        == settings.mcp
    )


def test_the_documented_example_shows_an_oauth_and_a_client_credentials_server() -> (
    None
):
    text = (Path(__file__).parents[1] / "docs" / "configuration.md").read_text(
        encoding="utf-8"
    )
    (example,) = [b for b in text.split("```yaml\n")[1:] if "tracker:" in b]
    settings = parse_settings(
        yaml.safe_load(example.split("```")[0]), base_dir=Path("/srv")
    )
    servers = settings.mcp.servers
    assert servers["tracker"].auth == McpAuthSettings(type="oauth")
    billing = servers["billing"].auth
    assert billing is not None and billing.type == "client_credentials"
    assert {"tracker", "billing"} <= set(
        settings.sandbox.mcp if settings.sandbox else ()
    )
