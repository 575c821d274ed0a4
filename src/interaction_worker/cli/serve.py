"""The commands that need no worker: `run` serves one, `schema` and `check-config` print documents."""

import argparse
import importlib
import json
import logging
import os
import sys
from dataclasses import replace
from pathlib import Path

import yaml

from .. import service
from ..app import build_worker, serve_options
from ..asyncapi import (
    ASYNCAPI_FILE,
    asyncapi_document,
    asyncapi_text,
    is_own_asyncapi,
)
from ..config import (
    CONFIG_ENV,
    DEFAULT_FILE,
    Settings,
    config_path,
    directory_problems,
    load_settings,
)
from ..embedded import remote_problem
from ..errors import ConfigurationError
from ..event_loop import LoopUnavailable
from ..schema import (
    SCHEMA_SUFFIX,
    Document,
    NotOurs,
    schema_text,
    titled,
    wire_schemas,
    write_documents,
)
from ..worker import InteractionWorker
from .output import UsageError, emit
from .parser import EXIT_OK

_LOGGER = logging.getLogger("interaction_worker")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # the MCP SDK's HTTP client
    settings = load_settings(_configuration_file(args), env=os.environ)
    if args.nats_url:
        settings = replace(settings, nats=replace(settings.nats, url=args.nats_url))
    if args.data_dir:
        settings = replace(settings, data_dir=args.data_dir.resolve())
    if args.metrics_listen:
        settings = replace(
            settings, metrics=replace(settings.metrics, listen=args.metrics_listen)
        )
    code = _import_app(args.app) if args.app else None
    worker = build_worker(settings, code)
    options = serve_options(settings, os.environ, port=args.port)
    if options.websocket is not None:
        problem = remote_problem(options.websocket, allow_remote=args.allow_remote)
        if problem is not None:
            raise UsageError(problem)

    def ready(url: str) -> None:
        print(f"ready {url}", flush=True)

    try:
        service.run(worker, options, loop=args.loop, ready=ready)
    except LoopUnavailable as error:
        raise UsageError(f"--loop {args.loop}: {error}") from None
    return EXIT_OK


def _configuration_file(args: argparse.Namespace) -> Path | None:
    """The file `run` reads, found as every client command finds it, and logged: a `run` and a
    `call` that disagree show it in the first line of the log."""
    cwd = Path.cwd()
    file = config_path(args.config, env=os.environ, cwd=cwd)
    if file is None:
        _LOGGER.info(
            "configuration: no %s in %s or its parents; the defaults, relative to it",
            DEFAULT_FILE,
            cwd,
        )
    else:
        origin = (
            "--config"
            if args.config is not None
            else CONFIG_ENV
            if os.environ.get(CONFIG_ENV)
            else f"the nearest {DEFAULT_FILE}"
        )
        _LOGGER.info("configuration: %s (%s)", file, origin)
    return file


def _import_app(spec: str) -> InteractionWorker:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise UsageError(f"APP must be module:attribute, not {spec!r}")
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise UsageError(f"cannot import {module_name}: {error}") from None
    value = getattr(module, attribute, None)
    if callable(value) and not isinstance(value, InteractionWorker):
        value = value()
    if not isinstance(value, InteractionWorker):
        raise UsageError(f"{spec} is not an InteractionWorker")
    return value


def schema(args: argparse.Namespace) -> int:
    """Without `--out`, one JSON document: every schema by name, and `asyncapi`."""
    if args.out is None:
        documents: dict[str, object] = dict(wire_schemas())
        documents["asyncapi"] = asyncapi_document()
        sys.stdout.write(
            json.dumps(documents, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        )
        sys.stdout.flush()
        return EXIT_OK
    out: Path = args.out
    files: dict[str, Document] = {
        f"{name}{SCHEMA_SUFFIX}": (schema_text(document), titled(name))
        for name, document in wire_schemas().items()
    }
    files[ASYNCAPI_FILE] = (asyncapi_text(), is_own_asyncapi)
    try:
        written = write_documents(out, files)
    except NotOurs as error:
        raise UsageError(
            f"--out {out}: {error.path.name} there is not a file this command wrote; it is left "
            "as it is (choose another directory, or move it away)"
        ) from None
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise UsageError(f"--out {out}: cannot write there: {reason.lower()}") from None
    for path in written:
        emit({"wrote": str(path)})
    return EXIT_OK


def check_config(args: argparse.Namespace) -> int:
    """The effective configuration, once it would start: its directories are checked as `run`
    checks them."""
    settings: Settings = load_settings(args.file, env=os.environ)
    problems = directory_problems(settings.workspace, settings)
    if problems:
        raise ConfigurationError("\n".join(problems))
    sys.stdout.write(yaml.safe_dump(settings.effective(), sort_keys=False))
    sys.stdout.flush()
    return EXIT_OK
