"""Checkpoint -> model bundle: ONNX encoder and decoder-step graphs, parity checks, int8 (``python -m export``)."""


class ExportError(Exception):
    """The export cannot proceed or its result failed a check; the message says which and why."""
