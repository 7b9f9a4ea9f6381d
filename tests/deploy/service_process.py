"""The real service for the deployment tests, started by the command the Dockerfile's CMD must equal
(``service.launcher.serve_command``, checked by test_dockerfile.py) on the container's host and port.

``running_service`` runs it on a free loopback port, waits for /readyz, and stops it with SIGTERM as
a container runtime would, requiring exit code 0.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from service.launcher import LiveService

CONTAINER_HOST = "0.0.0.0"
CONTAINER_PORT = 8000


@contextmanager
def running_service(model_dir: Path, *, env: dict[str, str] | None = None) -> Iterator[str]:
    """Start the service on ``model_dir`` with ``env``'s ``MT_*`` settings; yield its base URL."""
    with tempfile.TemporaryDirectory() as log_dir:
        service = LiveService({"MT_MODEL_DIR": str(model_dir), **(env or {})}, Path(log_dir) / "service.log")
        with service:
            yield service.url
        assert service.process.returncode == 0, f"exit {service.process.returncode} after SIGTERM:\n{service.log()}"
