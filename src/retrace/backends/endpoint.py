"""The endpoint file of a served engine: where `retrace serve` listens and what it serves.

`retrace serve` (retrace.app.serve) writes it atomically once the server answers and removes it
when it stops; the `served` backend (retrace.backends.served) reads it and refuses to send a
request unless the server serves the very model, chat template, engine and deterministic mode
that the job's config names, so a client never records results of another model. Fields:

    url            the OpenAI-compatible base URL, e.g. http://127.0.0.1:8123/v1
    served_model   the name the server answers to: `<model>@<fingerprint[:12]>`, so a live
                   check (GET /models) also tells a stale file whose port another server took
    model          {name, fingerprint, chat_template} from the manifest the server loaded
    backend        the engine behind the server (llamacpp | vllm): the cache key's engine
    engine         the engine settings the server runs with (`deterministic` among them)
    versions       the engine packages' versions in the server's environment
    pid, host, started

What this does not cover: a server process that a user swapped behind an unchanged URL and
name by hand; the file records what `retrace serve` started, nothing checks the weights the
server holds in memory after that.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from pathlib import Path
from urllib.parse import urlparse

from retrace.backends.base import BackendError, is_deterministic

LOOPBACK = ("127.0.0.1", "localhost", "::1")


class EndpointError(BackendError, ValueError):
    """A served engine that cannot be used for this job; the message is one line that says why.
    (A ValueError too, so the command line prints it as one line, not a traceback.)"""


def served_name(manifest: dict) -> str:
    """The model name a server answers to: the manifest's name and the start of its fingerprint."""
    return f"{manifest['name']}@{manifest['fingerprint'][:12]}"


def record(url: str, manifest: dict, backend: str, engine: dict, versions: dict) -> dict:
    """The endpoint file's content for a server that answers at `url`."""
    return {
        "url": url,
        "served_model": served_name(manifest),
        "model": {
            "name": manifest["name"],
            "fingerprint": manifest["fingerprint"],
            "chat_template": manifest.get("chat_template"),
        },
        "backend": backend,
        "engine": engine,
        "versions": versions,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def read(path: str | Path) -> dict:
    """The endpoint file at `path`; EndpointError if there is none (no server started, or it stopped)."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise EndpointError(
            f"endpoint file {path} does not exist: start the server first "
            "(`python -m retrace serve --model M --endpoint FILE`), or it has stopped"
        ) from None
    except ValueError as e:
        raise EndpointError(f"endpoint file {path} is not JSON ({e})") from None


def mismatch(ep: dict, manifest: dict, engine: dict) -> str | None:
    """Why the server of endpoint `ep` must not serve a job on `manifest` with client settings
    `engine` (its `server` and `deterministic`), or None when it may."""
    served, want = ep["model"], manifest
    if served["fingerprint"] != want["fingerprint"]:
        return (
            f"it serves model {served['name']} (fingerprint {served['fingerprint'][:12]}), but this job's "
            f"model is {want['name']} ({want['fingerprint'][:12]})"
        )
    if (served.get("chat_template") or None) != (want.get("chat_template") or None):
        return f"it applies chat template {served.get('chat_template')!r}, this job's model names {want.get('chat_template')!r}"
    if ep["backend"] != engine["server"]:  # config/backend/served.yaml states it
        return f"it runs engine {ep['backend']}, but backend.engine.server is {engine['server']}"
    if is_deterministic(ep.get("engine")) != is_deterministic(engine):
        return (
            f"it runs with deterministic={is_deterministic(ep.get('engine'))}, but this job's "
            f"backend.engine.deterministic is {is_deterministic(engine)}"
        )
    short = context_problem(ep, engine)
    if short:
        return short
    host = urlparse(ep["url"]).hostname
    if host in LOOPBACK and ep.get("host") != socket.gethostname():
        return (
            f"it listens on loopback ({ep['url']}) of host {ep.get('host')}, and this job runs on "
            f"{socket.gethostname()}: run the clients on the server's node, or serve on a reachable address"
        )
    return None


CONTEXT_KEYS = ("max_model_len", "n_ctx")  # vllm's, llama.cpp's (per slot)


def context_problem(ep: dict, engine: dict) -> str | None:
    """Why the server's context is too short for a job whose settings state `engine`'s
    (max_model_len, or n_ctx), or None: it is as long or longer, or either side states none
    (a server without one runs the model's own, the longest)."""
    served = ep.get("engine") or {}
    for key in CONTEXT_KEYS:
        want, has = engine.get(key), served.get(key)
        if want and has and int(has) < int(want):
            return (
                f"it was started with {key} {int(has)}, shorter than this job's {int(want)} "
                f"(backend.engine.{key}): start it with the experiment's settings "
                f"(`retrace serve --experiment E`, or --set engine.{key}={int(want)})"
            )
    return None


def check(path: str | Path, manifest: dict, engine: dict) -> dict:
    """The endpoint file at `path` if its server may serve this job; EndpointError (one line) if not."""
    ep = read(path)
    why = mismatch(ep, manifest, engine)
    if why:
        raise EndpointError(f"refusing endpoint {path}: {why}")
    return ep


def wait_for(path: str | Path, seconds: float, poll: float = 5.0) -> None:
    """Wait up to `seconds` for the endpoint file (or, for a folder, any endpoint file in it):
    on a cluster the clients may start while the server job is still queued or loading."""
    deadline = time.monotonic() + seconds
    while not _published(Path(path)) and time.monotonic() < deadline:
        time.sleep(min(poll, max(0.0, deadline - time.monotonic())))


def _published(p: Path) -> bool:
    return any(p.glob("*.json")) if p.is_dir() else p.exists()


def candidates(path: str | Path, manifest: dict, engine: dict, route: str = "") -> list[tuple[Path, dict]]:
    """The endpoints that may serve this job, the one to try first first.

    `path` is one endpoint file, or a folder of them (one server per GPU): then every file
    whose server may serve this job (`mismatch`), in an order that starts at the one `route`
    hashes to, so that jobs with the same route (the generate stage passes model/dataset/seed)
    reach the same server and share its prefix cache, and jobs spread over the servers."""
    p = Path(path)
    if not p.is_dir():
        return [(p, check(p, manifest, engine))]
    files = sorted(p.glob("*.json"))
    fit, reasons = [], []
    for f in files:
        try:
            ep = read(f)
        except EndpointError:
            continue  # removed since the listing: that server has stopped
        why = mismatch(ep, manifest, engine)
        (reasons.append(f"{f.name}: {why}") if why else fit.append((f, ep)))
    if not fit:
        detail = f" ({reasons[0]})" if reasons else ""
        raise EndpointError(
            f"refusing endpoint folder {p}: none of its {len(files)} files may serve this job{detail}"
        )
    start = int(hashlib.sha256(route.encode()).hexdigest(), 16) % len(fit)
    return fit[start:] + fit[:start]


def served_models(url: str, key: str | None = None, timeout: float = 30) -> set[str]:
    """The model names the server at `url` lists (GET /models, with the API key if it takes one);
    OSError if none answers."""
    import urllib.request

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with urllib.request.urlopen(
        urllib.request.Request(url.rstrip("/") + "/models", headers=headers), timeout=timeout
    ) as r:
        return models_listed(json.loads(r.read()))


def models_listed(reply: dict) -> set[str]:
    """Model names in a GET /models reply (OpenAI's `data[].id`; llama.cpp also lists `models[].name`)."""
    names = {m.get("id") for m in reply.get("data") or ()}
    names |= {m.get("name") for m in reply.get("models") or ()}
    return {n for n in names if n}


def remove_if_ours(path: str | Path, pid: int) -> None:
    """Delete the endpoint file if it still names process `pid` (a newer server may have replaced it)."""
    try:
        if json.loads(Path(path).read_text()).get("pid") == pid:
            Path(path).unlink()
    except (OSError, ValueError):
        pass
