"""Service configuration from the environment: every variable is ``MT_<FIELD NAME>``.

This is the only place pydantic-settings is used; the layers below take plain frozen dataclasses
built from it. Defaults suit the shipped model on a small CPU machine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from engine.language_id import supported_languages

# The shipped models, resolved against the repository checkout or installed tree, not the cwd.
DEFAULT_MODELS_DIR = Path(__file__).resolve().parent.parent / "models"
# Far beyond any machine's use, short of what would exhaust it: MT_THREADS=1000000 had onnxruntime
# start threads until the kernel killed the process, and each stream is an engine process.
MAX_THREADS = 1024
MAX_STREAMS = 256


class Settings(BaseSettings):
    """``MT_*`` environment variables (the README's configuration table mirrors these fields)."""

    model_config = SettingsConfigDict(env_prefix="MT_", extra="ignore", frozen=True)

    host: str = Field("127.0.0.1", description="Address to listen on (`--host` overrides).")
    port: int = Field(8000, ge=0, le=65535, description="TCP port (`--port` overrides).")
    models_dir: Path = Field(DEFAULT_MODELS_DIR, description="Model repository: every bundle below it is served.")
    model_dir: Path | None = Field(None, description="One bundle to serve instead of the repository.")
    pivot: bool = Field(True, description="Serve a pair without a direct model through two models (fr->en->de).")
    preload: str = Field(
        "all", description="Models loaded at start: all, none, or comma-separated model names; the rest on first use."
    )
    max_loaded_models: int = Field(
        0, ge=0, description="Most models loaded at once (least recently used idle ones unload); 0 = no limit."
    )
    max_loaded_mb: float = Field(
        0,
        ge=0,
        allow_inf_nan=False,
        description="Memory budget of the loaded models in MB (as measured at load); 0 = no limit.",
    )
    detect_languages: str = Field(
        "",
        description="Comma-separated ISO 639-1 codes language identification chooses from; empty = the served "
        "languages plus the major European ones.",
    )
    provider: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="onnxruntime execution provider: auto (CUDA when available, else CPU), cpu or cuda."
    )
    variant: str = Field(
        "auto",
        description="Bundle variant (fp32, int8; fp16: fp32 computed in float16, for a GPU); auto = manifest default "
        "for the device.",
    )
    threads: int = Field(
        0,
        ge=0,
        le=MAX_THREADS,
        description="CPU threads for onnxruntime in all; 0 = one per physical core, at most the CPUs the "
        "process may use (affinity, container CPU quota).",
    )
    streams: int = Field(
        0,
        ge=0,
        le=MAX_STREAMS,
        description=(
            "Batches decoded in parallel, sharing the threads (an engine process per stream); "
            "0 = auto: 2 on a CPU with 2 or more usable cores, else 1."
        ),
    )
    engine_process: bool = Field(
        True, description="Run the engine in a child process, off the HTTP process's GIL (restarted if it dies)."
    )
    engine_nice: int = Field(10, ge=0, le=19, description="Niceness added to the engine process (HTTP goes first).")
    shared_weights: bool = Field(
        True,
        description="Engine processes map one copy of each model's weights between them (CPU): onnxruntime's "
        "optimized graph, prepacked weights included, cached once per machine in `MT_DATA_DIR`/weights.",
    )
    row_pool: bool = Field(
        False,
        description="The engine decodes in a pool of rows, which batches join and leave between decoder steps, "
        "the self-attention cache written in place (on CUDA in float16); false: each batch as one rectangle of rows.",
    )
    cuda_graphs: bool = Field(
        False,
        description="With `MT_ROW_POOL` on CUDA: the pool's decoder step runs at a few fixed shapes, each captured "
        "once as a CUDA graph and replayed (every step scores the whole vocabulary: no shortlist).",
    )
    max_batch_sentences: int = Field(32, ge=1, description="Most texts in one engine batch.")
    max_batch_tokens: int = Field(4096, ge=1, description="Most source tokens in one engine batch.")
    max_wait_ms: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description="Longest a batch waits for more work while an engine worker is free (0: none).",
    )
    max_queue_sentences: int = Field(1024, ge=1, description="Queued texts beyond which requests get 429.")
    request_timeout_s: float = Field(30.0, gt=0, allow_inf_nan=False, description="Deadline of a request (504).")
    max_texts: int = Field(64, ge=1, description="Most texts in one request (413).")
    max_chars: int = Field(20_000, ge=1, description="Most characters in one request, all texts together (413).")
    max_beam_tokens: int = Field(
        65_536,
        ge=1,
        description="Most source tokens times beams in one request, all texts and both models of a pivot together "
        "(413): what the search's work and memory grow with.",
    )
    max_alignment_cells: int = Field(
        2_000_000,
        ge=1,
        description="Most alignment weights in one request with return_alignments, each text's estimated as its "
        "source tokens squared (413): a text's matrix grows with the square of its length.",
    )
    max_request_bytes: int = Field(1 << 20, ge=1024, description="Largest request body accepted (413).")
    max_file_bytes: int = Field(
        10 << 20, ge=1024, description="Largest file /v1/translate_file and /translate_file accept (413)."
    )
    upload_timeout_s: float = Field(
        120.0,
        gt=0,
        allow_inf_nan=False,
        description="Longest a file upload may take to arrive (408 past it): a client sending a byte now and then "
        "held its upload slot for as long as it went on.",
    )
    max_uploads: int = Field(
        16,
        ge=1,
        description="Most file uploads (/v1/translate_file, /translate_file, /v2/document) being received at once; "
        "past it an upload is refused before its body is read (429). Each spools up to MT_MAX_FILE_BYTES to the "
        "temporary directory while it arrives: 16 take at most 161 MiB of the 512 MiB deploy/k8s leaves them.",
    )
    max_document_bytes: int = Field(
        20 << 20,
        ge=1024,
        description="Most bytes of a file's content that are read, decompressed: all parts of a .docx together, "
        "other files as they are (413).",
    )
    max_document_texts: int = Field(
        100_000,
        ge=1,
        description="Most texts (paragraphs, headings, list items, cells, cues, lines) in one document (413), counted "
        "as it is read, which stops at the one past it: millions of tiny ones would take GBs to read and hours to "
        "translate. A 300-page book has about 20,000 paragraphs.",
    )
    max_document_chars: int = Field(
        2_000_000,
        ge=1,
        description="Most characters of text to translate in one document, as billed: without the tags its "
        "formatting is sent with (413). Twice a 300-page book's 1 M: what one upload may hold the service's "
        "translation for.",
    )
    document_memory_mb: int = Field(
        1024,
        ge=256,
        description="Most memory the document process may allocate (its heap, RLIMIT_DATA), in MiB; a document "
        "that needs more is refused (413) and the process replaced. Its imports take 150; the largest documents "
        "within the other limits 0.5 GB to read and write (a .docx of 20 MB of paragraphs).",
    )
    document_timeout_s: float = Field(
        60.0,
        gt=0,
        allow_inf_nan=False,
        description="Longest the document process may take to read or write one file; past it the process is "
        "replaced and the request answered 504 (a stopped or stuck process held every document request).",
    )
    data_dir: Path = Field(
        Path("data"),
        description="Directory the service keeps its data in (without MT_DATABASE_URL, glossaries, keys and DeepL "
        "documents in SQLite and files waiting for download; with MT_SHARED_WEIGHTS, the models' optimized graphs); "
        "relative to the working directory; made on first use.",
    )
    file_expiry_s: float = Field(
        1800,
        gt=0,
        allow_inf_nan=False,
        description="How long a file translated by /translate_file can be downloaded before it is deleted.",
    )
    document_lease_s: float = Field(
        30.0,
        gt=0,
        allow_inf_nan=False,
        description="How long a DeepL document a replica is translating stays its own without being renewed (every "
        "third of it): a stopped replica's documents are taken over by another this long after it stopped.",
    )
    api_keys: str = Field(
        "",
        description="Comma-separated API keys; empty = no authentication (a value of only commas and spaces is "
        "refused).",
    )
    require_keys: bool = Field(
        False,
        description="Every translation and glossary route requires a key: one made with `python -m service keys "
        "create` (with its limits) or one of MT_API_KEYS (which implies this). True with no key yet made refuses "
        "every request (401): revoking the last key never opens the service.",
    )
    database_url: str = Field(
        "",
        description="postgresql://user:password@host:5432/db: the database every replica keeps its keys, usage, "
        "glossaries, DeepL documents and files waiting for download in; empty = SQLite in MT_DATA_DIR (one replica).",
    )
    key_trust_s: float = Field(
        60.0,
        ge=0,
        allow_inf_nan=False,
        description="While the database cannot be reached, a key this replica checked within this many seconds is "
        "still served (its characters and requests not counted meanwhile); other keys get 503.",
    )
    cache_size: int = Field(1024, ge=0, description="Translations kept in the LRU cache; 0 = off.")
    cache_mb: float = Field(
        64,
        ge=0,
        allow_inf_nan=False,
        description="Memory the LRU cache's translations may take in MB, by an estimate of each; one over a "
        "sixteenth of it is not kept; 0 = off.",
    )
    drain_timeout_s: float = Field(
        30.0, ge=0, allow_inf_nan=False, description="On SIGTERM, longest wait for accepted requests."
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="Log level: debug, info, warning or error."
    )
    web_ui: bool = Field(True, description="Serve the translation web page at / (every file from the service itself).")
    root_path: str = Field(
        "",
        description="Path prefix the service is reached under behind a reverse proxy (/mt), which the proxy may "
        "strip or pass on; empty = none.",
    )
    public_url: str = Field(
        "",
        description="URL clients reach the service at, path prefix included (https://mt.example.com/mt): "
        "/translate_file's download links start with it; empty = links relative to the host, under MT_ROOT_PATH.",
    )
    cors_origins: str = Field(
        "",
        description="Comma-separated origins (https://app.example.com) whose web pages may call the API from a "
        "browser, or * for any (as LibreTranslate answers); empty = none: browsers keep other sites' pages from "
        "reading the answers.",
    )
    idle_timeout_s: float = Field(
        30,
        gt=0,
        allow_inf_nan=False,
        description="Longest a connection may take to send a request's headers (from its opening or its previous "
        "response), or leave its request's body without a byte; then it is closed.",
    )
    min_body_rate: int = Field(
        1024,
        ge=0,
        description="Fewest bytes a second a request's body must bring over each MT_BODY_RATE_WINDOW_S of the "
        "service waiting for it, else 408 (0 = no minimum): an upload dripping a byte every 25 s held its slot "
        "until MT_UPLOAD_TIMEOUT_S. A body may also end within the window.",
    )
    body_rate_window_s: float = Field(
        10.0,
        gt=0,
        allow_inf_nan=False,
        description="The span MT_MIN_BODY_RATE is measured over: a body's pauses shorter than it cost nothing.",
    )

    @field_validator("host")
    @classmethod
    def _an_address(cls, value: str) -> str:
        # An empty host has uvicorn listen on every interface, not the loopback the default names.
        if not value or value != value.strip():
            raise ValueError(f"must be an address or host name (got {value!r}): 0.0.0.0 listens on every interface")
        return value

    @field_validator("variant")
    @classmethod
    def _names_a_variant(cls, value: str) -> str:
        if not value.strip():
            raise ValueError(f"must name a variant of the bundles (fp32, int8, fp16) or auto (got {value!r})")
        return value.strip()

    @field_validator("preload")
    @classmethod
    def _names_models(cls, value: str) -> str:
        # Otherwise an empty value (a template's leftover) would silently preload nothing.
        if not _comma_separated(value):
            raise ValueError(f"names no model ({value!r}): give all, none, or comma-separated model names")
        return value

    @field_validator("detect_languages")
    @classmethod
    def _identifiable_languages(cls, value: str) -> str:
        if value and not _comma_separated(value):
            raise ValueError(f"names no language ({value!r}): give ISO 639-1 codes, or leave it empty for the default")
        if unknown := sorted({code.lower() for code in _comma_separated(value)} - supported_languages()):
            raise ValueError(f"language identification does not know {', '.join(unknown)}")
        return value

    @field_validator("models_dir", "data_dir", mode="before")
    @classmethod
    def _names_a_path(cls, value: object) -> object:
        # An empty value would be read as ".": whatever directory the service was started in.
        if isinstance(value, str) and not value.strip():
            raise ValueError(f"names no directory ({value!r})")
        return value

    @field_validator("data_dir")
    @classmethod
    def _can_be_a_directory(cls, value: Path) -> Path:
        # Made on first use: a file in its way would fail every glossary request (500) while the
        # service reports itself ready.
        if blocker := next((p for p in (value, *value.parents) if p.exists() and not p.is_dir()), None):
            raise ValueError(f"{blocker} is a file, not a directory")
        return value

    @field_validator("model_dir", mode="before")
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("root_path")
    @classmethod
    def _absolute_prefix(cls, value: str) -> str:
        prefix = value.rstrip("/")
        if prefix and not prefix.startswith("/"):
            raise ValueError(f"must start with / (got {value!r})")
        return prefix

    @field_validator("api_keys")
    @classmethod
    def _names_a_key(cls, value: str) -> str:
        # A value left by a template or a typo must not turn authentication off without a word.
        if value and not _comma_separated(value):
            raise ValueError(
                f"names no key ({value!r}): give comma-separated keys, or leave it empty for no authentication"
            )
        return value

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, value: str) -> str:
        if value and urlsplit(value).scheme not in ("postgresql", "postgres"):
            raise ValueError("must be a postgresql:// URL (or empty: SQLite in MT_DATA_DIR)")
        return value

    @field_validator("public_url")
    @classmethod
    def _absolute_url(cls, value: str) -> str:
        url = urlsplit(value.rstrip("/"))
        if value and (url.scheme not in ("http", "https") or not url.netloc or url.query or url.fragment):
            raise ValueError(f"must be an http:// or https:// URL without query or fragment (got {value!r})")
        return url.geturl()

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, value: str) -> str:
        for origin in _comma_separated(value) - {"*"}:
            url = urlsplit(origin)
            if url.scheme not in ("http", "https") or not url.netloc or url.path or url.query or url.fragment:
                raise ValueError(f"{origin!r} is not an origin: give scheme://host[:port], as a browser sends it")
        return value

    @model_validator(mode="after")
    def _public_url_has_the_prefix(self) -> Settings:
        path = urlsplit(self.public_url).path
        if self.public_url and self.root_path and not path.endswith(self.root_path):
            raise ValueError(
                f"MT_PUBLIC_URL ({self.public_url}) must end with MT_ROOT_PATH ({self.root_path}): "
                "it is the URL clients reach the service at, prefix included"
            )
        return self

    @model_validator(mode="after")
    def _check_limits(self) -> Settings:
        if self.max_queue_sentences < self.max_texts:
            raise ValueError(
                f"MT_MAX_QUEUE_SENTENCES ({self.max_queue_sentences}) must be >= MT_MAX_TEXTS ({self.max_texts}), "
                "or a full-size request could never be admitted"
            )
        return self

    @property
    def preload_names(self) -> frozenset[str] | None:
        """The models to load at start; None: all of them."""
        if self.preload.strip().lower() == "all":
            return None
        return frozenset(n.strip() for n in self.preload.split(",") if n.strip() and n.strip().lower() != "none")

    @property
    def weights_cache(self) -> Path | None:
        """Where the engine processes cache the optimized graphs they share; None: not shared."""
        return self.data_dir / "weights" if self.shared_weights else None

    @property
    def api_key_set(self) -> frozenset[str]:
        return _comma_separated(self.api_keys)

    @property
    def keys_required(self) -> bool:
        """Whether every translation and glossary request needs a key (MT_REQUIRE_KEYS, MT_API_KEYS)."""
        return self.require_keys or bool(self.api_key_set)

    @property
    def cors_origin_list(self) -> list[str]:
        return sorted(_comma_separated(self.cors_origins))


def _comma_separated(value: str) -> frozenset[str]:
    return frozenset(key.strip() for key in value.split(",") if key.strip())
