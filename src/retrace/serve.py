"""`retrace serve`: one long-lived engine that generation jobs reach over HTTP (service mode).

    python -m retrace serve --model smollm2-135m-q41 --endpoint results/serve/smollm2.json \
        --set engine.deterministic=true
    python -m retrace serve --model llama-3.1-8b-instruct --backend vllm \
        --endpoint results/serve/llama-$SLURM_JOB_ID.json

Loads the model's engine once (the manifest `results/models/<model>/manifest.json`, written by
the workflow's `model` stage; its weights are verified), waits until the server answers, then
writes the endpoint file (retrace.endpoint) atomically and serves until SIGTERM or SIGINT,
when it stops the engine and removes the endpoint file. Experiments reach it with
`backend: served` and `backend.engine.endpoint=FILE` (config/backend/served.yaml).

Engines: `llamacpp` runs xllamacpp's HTTP server in this process (the same server code the
in-process llamacpp backend calls), `vllm` starts `vllm serve` as a child process with the
engine settings of config/backend/vllm.yaml (and `--set` overrides) as its flags; with
`deterministic: true` the engine runs as the in-process backend would (llamacpp: one slot, no
KV prefix reuse; vllm: VLLM_BATCH_INVARIANT=1 on CUDA, one sequence at a time on CPU).

Binding: loopback (127.0.0.1) by default, so only processes on this node can send requests.
`--host` with another address (vllm only: xllamacpp's server listens on loopback only) makes
the engine reachable by anyone who can reach that port of this node — the server has no TLS,
and without `--api-key-env` no authentication: they can run requests on your GPU and read
what it generates. Do that only on a cluster's private network, with an API key.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from retrace import endpoint
from retrace.atomic import write_json

log = logging.getLogger("retrace.serve")
ENGINES = ("llamacpp", "vllm")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="retrace serve",
        description="Serve one model's engine over HTTP for generation jobs (backend `served`).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  retrace serve --model smollm2-135m-q41 --endpoint results/serve/smollm2.json\n"
        "  retrace serve --model smollm2-135m-q41 --set engine.deterministic=true --endpoint e.json\n"
        "  retrace serve --model llama-3.1-8b-instruct --backend vllm --host $(hostname) --api-key-env KEY "
        "--endpoint results/serve/llama.json",
    )
    p.add_argument("--model", required=True, help="config/model/<name>.yaml")
    p.add_argument("--backend", choices=ENGINES, default="llamacpp", help="the engine (default llamacpp)")
    p.add_argument("--set", action="append", default=[], metavar="engine.KEY=VALUE", help="an engine setting")
    p.add_argument("--endpoint", type=Path, required=True, help="where to write the endpoint file")
    p.add_argument(
        "--manifest", type=Path, default=None, help="default: results/models/<model>/manifest.json"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback; see --help)")
    p.add_argument("--port", type=int, default=0, help="default: a free port")
    p.add_argument("--api-key-env", default=None, help="vllm: the environment variable holding the API key")
    p.add_argument(
        "--ready-timeout", type=float, default=1800.0, help="seconds to wait for the engine to load"
    )
    return p


def engine_settings(backend: str, sets: list[str]) -> dict:
    """config/backend/<backend>.yaml's engine settings with `engine.KEY=VALUE` overrides applied."""
    from retrace.config import compose

    bad = [s for s in sets if not s.startswith("engine.")]
    if bad:
        raise ValueError(f"--set takes engine.KEY=VALUE, got {bad[0]!r}")
    return compose({"backend": backend}, [f"backend.{s}" for s in sets])["backend"]["engine"]


class LlamaCppServer:
    """xllamacpp's HTTP server in this process (loopback only)."""

    def __init__(self, manifest: dict, settings: dict, host: str, port: int, api_key_env: str | None = None):
        from retrace.backends.llamacpp import LlamaCppBackend, prompt_cache_on

        if host not in endpoint.LOOPBACK:
            raise ValueError(
                f"--host {host}: xllamacpp's server listens on loopback only; use --backend vllm"
            )
        if api_key_env:
            raise ValueError("--api-key-env: for --backend vllm (llamacpp serves loopback only)")
        alias = endpoint.served_name(manifest)
        self.engine = LlamaCppBackend(manifest, {**settings, "port": port, "alias": alias})
        self.url = self.engine.url + "/v1"
        # the settings in effect (deterministic mode forces one slot and no KV prefix reuse)
        self.settings = {
            **settings,
            "n_parallel": self.engine.slots,
            "cache_prompt": prompt_cache_on(settings),
        }

    def alive(self) -> bool:
        return True  # in this process: it lives as long as we do

    def close(self) -> None:
        self.engine.close()


class VLLMServer:
    """`vllm serve` as a child process, with the in-process backend's engine arguments as flags."""

    def __init__(self, manifest: dict, settings: dict, host: str, port: int, api_key_env: str | None):
        from retrace.backends.llamacpp import _free_port

        port = port or _free_port()
        cmd, env = vllm_command(manifest, settings, host, port, _cuda()), dict(os.environ)
        if api_key_env:
            # vllm reads VLLM_API_KEY itself; on the command line the key would show in `ps`
            env["VLLM_API_KEY"] = os.environ[api_key_env]
        if settings.get("deterministic") and _cuda():
            env["VLLM_BATCH_INVARIANT"] = "1"  # batch-invariant kernels, as the in-process backend sets
        log.info("starting %s", " ".join(cmd[:4]))
        self.proc = subprocess.Popen(cmd, env=env)
        self.settings = settings
        self.url = f"http://{host}:{port}/v1"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _cuda() -> bool:
    from retrace.backends.vllm import _cuda_available

    return _cuda_available()


def vllm_command(manifest: dict, settings: dict, host: str, port: int, cuda: bool) -> list[str]:
    """`vllm serve MODEL --flag value …` from the in-process backend's LLM arguments."""
    from retrace.backends.vllm import llm_arguments

    args = llm_arguments(manifest, settings, cuda=cuda)
    cmd = ["vllm", "serve", str(args.pop("model")), "--served-model-name", endpoint.served_name(manifest)]
    cmd += ["--host", host, "--port", str(port)]
    for key, value in sorted(args.items()):
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            cmd.append(flag if value else "--no-" + key.replace("_", "-"))
        elif value is not None:
            cmd += [flag, str(value)]
    return cmd


def wait_until_answers(server, name: str, timeout: float, key: str | None = None) -> None:
    """Poll GET /models until the server lists `name`; RuntimeError if it dies or times out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not server.alive():
            raise RuntimeError("the engine exited before it answered")
        try:
            if name in endpoint.served_models(server.url, key, timeout=5):
                return
        except OSError:
            pass  # still loading
        time.sleep(0.5)
    raise RuntimeError(f"no answer from {server.url} within {timeout:.0f} s")


def check_endpoint_path(path: Path, key: str | None) -> None:
    """Refuse, before loading anything, an --endpoint that is a folder or whose file names a
    server that still answers (a second server must not take over a live one's clients);
    a file left by a killed server is replaced."""
    if path.is_dir() or str(path).endswith("/"):
        raise ValueError(f"--endpoint {path} is a folder: name a file in it, e.g. {Path(path) / 'gpu0.json'}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        return
    try:
        old = endpoint.read(path)
        live = old["served_model"] in endpoint.served_models(old["url"], key, timeout=5)
    except (OSError, ValueError, KeyError):
        return  # unreadable, or nobody answers there: a leftover
    if live:
        raise ValueError(
            f"--endpoint {path}: the server it names still answers at {old['url']} (pid {old['pid']})"
        )


def serve(a: argparse.Namespace, stop: threading.Event) -> None:
    """Start the engine, publish the endpoint file, serve until `stop` is set, clean up."""
    from retrace import closure, models

    check_endpoint_path(a.endpoint, os.environ[a.api_key_env] if a.api_key_env else None)
    settings = engine_settings(a.backend, a.set)
    path = a.manifest or Path("results/models") / a.model / "manifest.json"
    if not path.exists():
        raise ValueError(f"no manifest at {path}: materialise the model first (`snakemake --cores 1 {path}`)")
    manifest = models.load_manifest(path)
    if manifest["name"] != a.model:
        raise ValueError(f"{path} is the manifest of {manifest['name']!r}, not --model {a.model!r}")
    server: LlamaCppServer | VLLMServer
    if a.backend == "llamacpp":
        server = LlamaCppServer(manifest, settings, a.host, a.port, a.api_key_env)
    else:
        server = VLLMServer(manifest, settings, a.host, a.port, a.api_key_env)
    try:
        key = os.environ[a.api_key_env] if a.api_key_env else None
        wait_until_answers(server, endpoint.served_name(manifest), a.ready_timeout, key)
        info = endpoint.record(
            server.url, manifest, a.backend, server.settings, closure.engine_versions(a.backend)
        )
        write_json(a.endpoint, info)
        log.info("serving %s at %s; endpoint %s", info["served_model"], server.url, a.endpoint)
        while not stop.wait(1.0):
            if not server.alive():
                raise RuntimeError(f"the engine behind {server.url} exited")
    finally:
        endpoint.remove_if_ours(a.endpoint, os.getpid())
        server.close()
        log.info("stopped; removed %s", a.endpoint)


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())  # a clean exit: the endpoint file goes too
    serve(a, stop)
    return 0
