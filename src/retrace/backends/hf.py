"""Hugging Face transformers as an engine: the reference implementation, slow but plain.

Loads, in this order of preference, the model's `hf_dir`, its hub `repo@revision`
(from the local cache; retrace runs with HF_HUB_OFFLINE=1), or its GGUF file, which
transformers dequantizes to float weights (`from_pretrained(dir, gguf_file=name)`, the
tokenizer and chat template included). Decoding is our own loop over a left-padded batch
so that each row keeps its own temperature/top-p/top-k, seed (a torch.Generator per row),
stop strings and max_tokens; greedy rows take the argmax.

Engine config keys: device ("auto" | "cpu" | "cuda"), dtype ("auto" | "float32" |
"bfloat16" | ...), batch_size. Logprobs are those of the model's raw distribution
(before temperature/top-p), as vLLM reports them. Does not cover: prefix caching
(`cached_prompt_tokens` is always 0), batch invariance (padding a row next to a longer
one may change its last float bits, so a seed repeats exactly only for the same batch).
`deterministic: true` decodes one request at a time (no padding neighbours) with torch's
deterministic algorithms on (and cuBLAS's fixed workspace on CUDA).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from retrace.backends.base import Backend, BackendError
from retrace.util.records import Completion, Request, TokenLogprob
from retrace.util.registry import BACKENDS


@dataclass
class _Row:
    """Decoding state of one request inside a batch."""

    request: Request
    prompt_ids: list[int]
    generator: object = None
    ids: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)
    text: str = ""
    finish_reason: str | None = None


@BACKENDS.register("hf")
class HFBackend(Backend):
    name = "hf"
    engine_kinds = {"device": "str", "dtype": "str", "batch_size": "int", "deterministic": "bool"}

    def __init__(self, model: dict, engine: dict | None = None):
        super().__init__(model, engine)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if self.deterministic:
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
            torch.use_deterministic_algorithms(True)
        source, kwargs = model_source(model)
        self.device = _device(self.engine["device"])  # config/backend/hf.yaml states device and dtype
        self.tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
        if model.get("chat_template"):
            self.tokenizer.chat_template = model["chat_template"]
        dtype = self.engine["dtype"]
        self.lm = AutoModelForCausalLM.from_pretrained(
            source, dtype=dtype if dtype == "auto" else getattr(torch, dtype), **kwargs
        )
        self.lm.to(self.device).eval()
        self.eos_ids = _eos_ids(self.lm, self.tokenizer)
        self.pad_id = (
            self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else min(self.eos_ids)
        )

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        size = 1 if self.deterministic else max(1, self.batch_size())
        out: list[Completion] = []
        for i in range(0, len(requests), size):
            out.extend(self._batch(requests[i : i + size]))
        return out

    def prompt_ids(self, request: Request) -> list[int]:
        """Token ids of a request's prompt: the chat template for messages, else the raw prompt."""
        if request.prompt is not None:
            return self.tokenizer(request.prompt)["input_ids"]
        msgs = [{"role": m.role, "content": m.content} for m in request.messages]
        text = self.tokenizer.apply_chat_template(
            msgs,
            tokenize=False,
            add_generation_prompt=not request.continue_final,
            continue_final_message=request.continue_final,
        )
        # The template already writes its special tokens; adding BOS again would double it.
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _batch(self, requests: Sequence[Request]) -> list[Completion]:
        import torch

        start = time.perf_counter()
        rows = [self._row(r) for r in requests]
        width = max(len(r.prompt_ids) for r in rows)
        ids = torch.tensor(
            [[self.pad_id] * (width - len(r.prompt_ids)) + r.prompt_ids for r in rows], device=self.device
        )
        mask = torch.tensor(
            [[0] * (width - len(r.prompt_ids)) + [1] * len(r.prompt_ids) for r in rows], device=self.device
        )
        past, steps = None, max(r.request.sampling.max_tokens for r in rows)
        with torch.inference_mode():
            for _ in range(steps):
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                if past is not None:
                    positions = positions[:, -1:]
                out = self.lm(
                    input_ids=ids,
                    attention_mask=mask,
                    position_ids=positions,
                    past_key_values=past,
                    use_cache=True,
                )
                past = out.past_key_values
                chosen = [self._step(row, out.logits[j, -1].float()) for j, row in enumerate(rows)]
                if all(r.finish_reason for r in rows):
                    break
                ids = torch.tensor([[t] for t in chosen], device=self.device)
                mask = torch.cat([mask, torch.ones_like(ids)], dim=1)
        latency = time.perf_counter() - start
        return [self._completion(r, latency) for r in rows]

    def _row(self, request: Request) -> _Row:
        import torch

        if request.prompt is None and not request.messages:
            raise BackendError(f"request tag={request.tag!r} has neither messages nor a prompt")
        row = _Row(request, self.prompt_ids(request))
        if request.sampling.temperature > 0:
            row.generator = torch.Generator(device=self.device).manual_seed(int(request.sampling.seed))
        return row

    def _step(self, row: _Row, logits) -> int:
        """Pick the next token of one row, record it, and decide whether the row is done."""
        if row.finish_reason:
            return self.pad_id
        s = row.request.sampling
        token = _choose(logits, s.temperature, s.top_p, s.top_k, row.generator)
        row.ids.append(token)
        if s.logprobs is not None:
            row.logprobs.append(self._logprob(logits, token, s.logprobs))
        if token in self.eos_ids and not s.ignore_eos:
            row.finish_reason = "stop"
            return token
        row.text = self.tokenizer.decode(row.ids, skip_special_tokens=True)
        cut = _first_stop(row.text, s.stop)
        if cut is not None:
            row.text, row.finish_reason = row.text[:cut], "stop"
        elif len(row.ids) >= s.max_tokens:
            row.finish_reason = "length"
        return token

    def _logprob(self, logits, token: int, k: int) -> TokenLogprob:
        import torch

        lp = torch.log_softmax(logits, dim=-1)
        top: tuple[tuple[str, float], ...] = ()
        if k > 0:
            values, idx = lp.topk(k)
            top = tuple((self.tokenizer.decode([int(i)]), float(v)) for v, i in zip(values, idx))
        return TokenLogprob(self.tokenizer.decode([token]), float(lp[token]), top)

    def _completion(self, row: _Row, latency: float) -> Completion:
        logprobs = tuple(row.logprobs) if row.request.sampling.logprobs is not None else None
        # A byte-level token cut at max_tokens leaves half a UTF-8 character, decoded as
        # U+FFFD; llama.cpp and vLLM hold such bytes back, and so do we.
        text = row.text.rstrip("\ufffd")
        return Completion(
            text=text,
            finish_reason=row.finish_reason or "length",
            prompt_tokens=len(row.prompt_ids),
            generated_tokens=len(row.ids),
            cached_prompt_tokens=0,
            logprobs=logprobs,
            latency_s=latency,
        )

    def close(self) -> None:
        self.lm = None


def model_source(model: dict) -> tuple[str, dict]:
    """Where `from_pretrained` should load this manifest from, with its extra arguments: the
    files it names and verified (an HF folder, else a GGUF) before its hub id, which a GGUF
    model's config also carries (as the upstream it came from) and which is offline here."""
    if model.get("hf_dir"):
        return model["hf_dir"], {}
    if model.get("gguf"):
        return os.path.dirname(model["gguf"]), {"gguf_file": os.path.basename(model["gguf"])}
    if model.get("hub"):
        return model["hub"]["repo"], {"revision": model["hub"].get("revision")}
    raise BackendError(f"model {model.get('name')!r} has no hf_dir, hub repo or gguf file")


def _device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def _eos_ids(lm, tokenizer) -> set[int]:
    eos = lm.generation_config.eos_token_id
    ids = set(eos if isinstance(eos, (list, tuple)) else [eos] if eos is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return ids


def _choose(logits, temperature: float, top_p: float, top_k: int, generator) -> int:
    """Greedy argmax at temperature 0, else sample after temperature, top-k and top-p."""
    import torch

    if temperature <= 0:
        return int(logits.argmax())
    scaled = logits / temperature
    if top_k > 0:
        kth = scaled.topk(min(top_k, scaled.numel())).values[-1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    if top_p < 1.0:
        sorted_p, order = probs.sort(descending=True)
        # Keep the smallest head whose mass reaches top_p (the token crossing it included).
        drop = sorted_p.cumsum(0) - sorted_p >= top_p
        probs = probs.scatter(0, order[drop], 0.0)
    return int(torch.multinomial(probs, 1, generator=generator))


def _first_stop(text: str, stops: Sequence[str]) -> int | None:
    """Index where the earliest stop string begins in `text`, or None."""
    hits = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return min(hits) if hits else None
