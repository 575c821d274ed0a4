"""What can go wrong with the embedded server, each as one line without a path."""


class EmbeddedServerError(Exception):
    """The embedded nats-server could not be found, started or reached."""


class DataDirInUse(EmbeddedServerError):
    """Another process (a worker or its nats-server) holds the data directory's lock."""

    def __init__(self, pid: int | None) -> None:
        holder = "another process" if pid is None else f"process {pid}"
        super().__init__(
            f"the data directory is in use by {holder}; stop it or choose another data directory"
        )
        self.pid = pid


class ForeignDataDir(EmbeddedServerError):
    """The data directory holds files, none of them a worker's: they could be overwritten."""

    def __init__(self) -> None:
        super().__init__(
            "the data directory holds files that no worker wrote (a worker writes its lock, "
            "token, url and nats-server.conf there, over files of those names); choose a new or "
            "empty directory"
        )


class PortInUse(EmbeddedServerError):
    def __init__(self, port: int) -> None:
        super().__init__(f"port {port} is in use")
