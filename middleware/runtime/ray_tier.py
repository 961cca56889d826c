"""Deploy the model tier on Ray Serve: ``python -m middleware.runtime.ray_tier``.

Reads the same settings as the proxy (``--config`` / ``FACTCHECK_CONFIG``, ``FACTCHECK_*``) and
deploys one Serve application per model they name (``ray_serve.model_specs``: the embedder, the
NLI model, and the relevance and seq2seq models when configured) on the HTTP ingress
``--host``:``--port``. Proxies then use it with ``runtime.backend: ray`` and
``runtime.ray_serve_url: http://HOST:PORT``.

``--address`` (default ``runtime.ray_address``):
- ``auto`` or ``HOST:PORT``: a running cluster (``ray start --head`` on this node, workers
  joined with ``ray start --address``); the command deploys and, with ``--block``, stays until
  SIGTERM/SIGINT, then removes the applications.
- ``local``: starts a one-node cluster owned by this process and stops it on SIGTERM/SIGINT.
  With a loopback ``--host`` the node's address is loopback too, so every Ray connection stays
  on 127.0.0.1 (the tests and the loopback load test use this); the dashboard and usage stats
  are off.

Prints ``ready URL node=IP`` on stdout once every application answers.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import signal
import sys
import threading

log = logging.getLogger(__name__)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m middleware.runtime.ray_tier", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="settings file (else FACTCHECK_CONFIG)")
    parser.add_argument("--address", help="Ray cluster: auto, HOST:PORT or local (default runtime.ray_address)")
    parser.add_argument("--host", default="127.0.0.1", help="address of the Serve HTTP ingress")
    parser.add_argument("--port", type=int, default=8100, help="port of the Serve HTTP ingress")
    parser.add_argument("--num-cpus", type=int, default=None, help="local: CPUs of the cluster (default: all)")
    parser.add_argument("--object-store-mb", type=int, default=200, help="local: object store size")
    parser.add_argument("--block", action="store_true", help="stay until SIGTERM/SIGINT (always with local)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from middleware.settings import load_settings

    settings = load_settings(args.config)
    address = args.address or settings.runtime.ray_address
    local = address == "local"
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if local and _is_loopback(args.host):
        # Ray's own switch for a single-node, loopback-only cluster: the node's address becomes
        # 127.0.0.1 instead of the machine's routable one. Read when ray is imported.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray
    from ray import serve

    from middleware.runtime.ray_client import ROUTES
    from middleware.runtime.ray_serve import application, model_specs

    if local:
        ray.init(address="local", num_cpus=args.num_cpus, include_dashboard=False,
                 object_store_memory=args.object_store_mb * 1024 * 1024, log_to_driver=False,
                 configure_logging=False)
    else:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    try:
        serve.start(http_options={"host": args.host, "port": args.port})
        specs = model_specs(settings.runtime, settings.pipeline.seq2seq_model)
        for kind, spec in specs.items():
            log.info("deploying the %s model %r", kind, spec)
            serve.run(application(kind, spec, settings.runtime), name=kind, route_prefix=ROUTES[kind])
        node = ray.util.get_node_ip_address()
        print(f"ready http://{args.host}:{args.port} node={node} models={','.join(specs)}", flush=True)
        if not (local or args.block):
            return 0
        stop = threading.Event()  # from here on SIGTERM/SIGINT remove the applications (before: they end us)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        stop.wait()
        for kind in specs:
            serve.delete(kind)
        if local:
            serve.shutdown()
        return 0
    finally:
        if local or args.block:
            ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
