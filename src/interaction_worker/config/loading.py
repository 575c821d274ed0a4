"""Finding and reading the configuration file, then applying the environment's NATS URL."""

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigurationError
from .discovery import SearchBounds, find_upwards
from .model import Settings
from .parsing import NATS_URL_EXAMPLE, NATS_URL_SCHEMES, parse_settings
from .values import url_problem

CONFIG_ENV = "INTERACTION_CONFIG"
NATS_URL_ENV = "INTERACTION_NATS_URL"
DEFAULT_FILE = "worker.yaml"


def config_path(
    path: Path | None,
    *,
    env: Mapping[str, str],
    cwd: Path | None = None,
    bounds: SearchBounds | None = None,
) -> Path | None:
    """The file to read: `path`, else `INTERACTION_CONFIG`, else the nearest safe `worker.yaml`
    in `cwd` or its parents (`find_upwards`), the one `run` and every client command agree on.

    Raises:
        UnsafeFile: the nearest `worker.yaml` belongs to another user or others may write it.
    """
    cwd = Path.cwd() if cwd is None else cwd
    if path is not None:
        return cwd / path
    if env.get(CONFIG_ENV):
        return cwd / env[CONFIG_ENV]
    return find_upwards(DEFAULT_FILE, cwd, bounds=bounds)


def load_settings(
    path: Path | None,
    *,
    env: Mapping[str, str],
    cwd: Path | None = None,
    bounds: SearchBounds | None = None,
) -> Settings:
    """Read and validate the configuration, then apply `INTERACTION_NATS_URL`.

    Args:
        path: the `--config` file; None looks at `INTERACTION_CONFIG`, then searches upwards
            (`config_path`).
        env: the environment (`os.environ` in production).
        cwd: the directory the search and relative paths start from; the current one by default.
        bounds: who searches and where the search stops; this process's user and home by default.

    Raises:
        ConfigurationError: a file that was named but cannot be read, a found file that is not
            safe to read (`UnsafeFile`), invalid YAML, or invalid settings.
    """
    cwd = Path.cwd() if cwd is None else cwd
    file = config_path(path, env=env, cwd=cwd, bounds=bounds)
    if file is None:
        data, base_dir = None, cwd
    else:
        data, base_dir = _read_yaml(file), file.parent
    problems: list[str] = []
    url = env.get(NATS_URL_ENV) or None
    if url is not None:
        problem = url_problem(url, NATS_URL_SCHEMES, NATS_URL_EXAMPLE)
        if problem is not None:
            problems.append(f"{NATS_URL_ENV} {problem}")
    try:
        settings = parse_settings(data, base_dir=base_dir)
    except ConfigurationError as error:
        raise ConfigurationError("\n".join([str(error), *problems])) from None
    if problems:
        raise ConfigurationError("\n".join(problems))
    if url is not None:
        settings = _with_url(settings, url)
    return settings


def _with_url(settings: Settings, url: str) -> Settings:
    return replace(settings, nats=replace(settings.nats, url=url))


def _read_yaml(file: Path) -> Any:
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        raise ConfigurationError(f"configuration file not found: {file}") from None
    except OSError as error:
        raise ConfigurationError(
            f"configuration file cannot be read: {file}: {error.strerror}"
        ) from None
    try:
        return yaml.load(raw, Loader=_StrictLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = (
            ""
            if mark is None
            else f" at line {mark.line + 1}, column {mark.column + 1}"
        )
        problem = error.problem or error.context or "invalid syntax"
        raise ConfigurationError(f"{file}: invalid YAML{where}: {problem}") from None
    except yaml.YAMLError as error:
        raise ConfigurationError(f"{file}: invalid YAML: {error}") from None


class _StrictLoader(yaml.SafeLoader):
    """`yaml.safe_load`, except that a key given twice in one mapping is an error, not a silent overwrite."""

    def construct_mapping(
        self, node: yaml.MappingNode, deep: bool = False
    ) -> dict[Any, Any]:
        self.flatten_mapping(node)
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                continue  # unhashable: the base class reports it
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key}", key_node.start_mark
                )
        return super().construct_mapping(node, deep=deep)
