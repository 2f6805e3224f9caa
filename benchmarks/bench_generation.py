"""Sampling G completions per prompt: rlx's sampler against transformers' ``generate``.

What GRPO spends its generation time on: ``rlx.llm.generation.sample`` (the one function the
online stages sample through) against ``model.generate`` with its default dynamic cache and
with its static cache (``cache_implementation="static"``), on a real model.

Protocol (one torch thread, float32, CPU):

- **Model**: ``--model`` (default ``models/smollm2-135m-instruct``, SmolLM2-135M-Instruct as
  ``make real-model`` converts it), loaded once by ``rlx.llm.models.load_model``; every method
  runs on that same model object.
- **Shape**: GRPO's, 8 prompts x G = 8 samples = 64 sequences, each exactly N new tokens, for
  N in ``--lengths`` (default 12 and 256). The prompts are eight short arithmetic word
  problems, encoded as rlx encodes a prompt (``[bos] + prompt``, left padded); generate gets
  those very ids and mask.
- **Same work**, read from both sides' settings (:func:`like_for_like`, asserted by
  ``tests/benchmarks/test_like_for_like.py`` and before every run): the same prompts, G samples
  of each (rlx's ``n``, generate's ``num_return_sequences``), N new tokens, sampling at
  temperature 1 with top-p 1 and no top-k (generate's ``top_k=0``; neither side then applies a
  logits warper), the same eos and pad ids, the same dtype and threads.
- **Equal lengths**: every row must get exactly N tokens, so the eos logit is masked to -inf
  on both sides by one forward hook on the model's output layer (:func:`mask_eos`), which both
  samplers call through. Each side keeps its own eos handling (the per-step check of which
  rows have finished) running, as it runs in GRPO; it just never fires. Nothing is added to
  either side's own logits processing (generate's ``min_new_tokens`` would add a processor on
  its side only). Each call asserts that all 64 rows hold N tokens.
- **Clocks**, the same span on every side: from the prompt strings to the completions as
  lists of token ids. rlx: one ``sample(model, tokenizer, prompts, n=G, ...)`` call (it
  encodes, prefills each prompt once, copies its cache G times and decodes). generate: the
  same encoding, ``generate(input_ids, attention_mask, num_return_sequences=G, ...)`` (the 64
  rows prefilled), and the same cut at eos of its rows as lists.
- **The floor**: the model's forward passes alone for the same shapes, no sampling logic (no
  logits processors, no softmax, no draws, no stop checks): a prefill, then N - 1 single-token
  passes with a dynamic KV cache (the N-th token's logits come from the (N-1)-th pass; both
  samplers make exactly these passes). Two floors: with a shared prefill (each prompt once,
  its cache repeated G times: the passes rlx makes) and with a per-row prefill (all 64 rows:
  the passes generate makes). A sampler's time over its floor is its overhead.
- **Repeats**: ``--repeats`` (at least 3), every method in each, their order rotated from one
  repeat to the next; a warm-up call of each method (2 tokens) first, off the clocks. Each
  repeat seeds torch's generator the same for every method, so rlx and generate draw from
  the same random stream; the share of rlx's tokens equal to generate's is recorded (equal
  but for float rounding: rlx's 8-row prefill and generate's 64-row one round differently).

Reported, per length: seconds per call (median, min), new tokens per second, rlx's speed over
each method's (ratio of the medians and of the mins), and each method's time over either
floor, written to ``benchmarks/results/generation.json``. Goal, per length: rlx at least as
fast as generate's faster cache (speed ratio >= 1 on the medians).

Run: ``.venv/bin/python benchmarks/bench_generation.py [--lengths 12 256] [--repeats 3]
[--model PATH]``; ``--quick`` checks that it works (a tiny model built in code, 4 prompts x 4
samples, 3 and 8 tokens, one repeat).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import inspect  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

from results import (  # noqa: E402
    MIN_REPEATS,
    ROOT,
    goal,
    ratio,
    settings_table,
    spread,
    write_result,
)

PROMPTS = (
    "Ann has 12 apples and gives 5 to Ben. How many apples does Ann have left?",
    "A train travels 60 km in one hour. How far does it travel in 3 hours?",
    "Tom buys 4 pencils at 3 dollars each and a notebook for 7 dollars. How much does he spend?",
    "What is 17 + 26?",
    "A class has 30 students and a third of them walk to school. How many walk?",
    "Sara reads 15 pages a day. How many days does she need for a 120-page book?",
    "There are 7 boxes with 8 eggs in each box. How many eggs are there in total?",
    "Mia is twice as old as her brother, who is 6. How old will Mia be in 4 years?",
)
"""The eight prompts, as GRPO gets them from a prompt file: plain text of different lengths."""
G = 8
LENGTHS = (12, 256)
QUICK_PROMPTS, QUICK_G, QUICK_LENGTHS = 4, 4, (3, 8)
THREADS = 1
SEED = 0
TEMPERATURE, TOP_P, TOP_K = 1.0, 1.0, 0
DEFAULT_MODEL = ROOT / "models" / "smollm2-135m-instruct"
LIBRARIES = ("torch", "transformers", "tokenizers", "safetensors")
RLX, DYNAMIC, STATIC = "rlx sample", "generate, dynamic cache", "generate, static cache"
FLOOR_SHARED, FLOOR_ROWS = "floor, shared prefill", "floor, per-row prefill"
METHODS = (RLX, DYNAMIC, STATIC, FLOOR_SHARED, FLOOR_ROWS)
PEERS = {DYNAMIC: "dynamic", STATIC: "static"}
"""generate's two caches, as ``cache_implementation`` names them (dynamic: left unset)."""


# ---------------------------------------------------------------------------- the model
def load(path: Path) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of the folder, float32, eos logit masked (:func:`mask_eos`)."""
    from rlx.llm.models import load_model

    if not (Path(path) / "config.json").is_file():
        raise SystemExit(
            f"no model folder at {path}: run `make real-model` (it converts "
            "SmolLM2-135M-Instruct into models/smollm2-135m-instruct), or pass --model PATH"
        )
    model, tokenizer = load_model(path, dtype="float32")
    model.eval()
    mask_eos(model, tokenizer.eos_token_id)
    return model, tokenizer


def tiny_model(folder: Path) -> tuple[Any, Any]:
    """The ``--quick`` model: a tiny random Llama whose character tokenizer covers the
    prompts (``rlx.llm.make_tiny_lm``, built in code: no hub)."""
    from rlx.llm import make_tiny_lm

    return load(make_tiny_lm(folder, texts=PROMPTS, max_length=512))


def mask_eos(model: Any, eos_id: int) -> Any:
    """Set the eos logit to -inf in every forward pass of ``model`` (a hook on its output
    layer), so that every sampler, calling the same model, draws exactly the tokens it is asked
    for; returns the hook's handle."""

    def hook(module: Any, inputs: Any, logits: torch.Tensor) -> torch.Tensor:
        logits[..., eos_id] = -torch.inf
        return logits

    handle = model.get_output_embeddings().register_forward_hook(hook)
    model._bench_eos_masked = eos_id
    return handle


def eos_masked(model: Any) -> int | str:
    """The token id whose logit :func:`mask_eos` masks on ``model``, or ``"no"``."""
    hooks = model.get_output_embeddings()._forward_hooks
    return getattr(model, "_bench_eos_masked", "no") if hooks else "no"


# ---------------------------------------------------------------------------- both sides
def rlx_kwargs(group: int, new_tokens: int) -> dict[str, Any]:
    """What the benchmark passes to ``rlx.llm.generation.sample`` besides model, tokenizer
    and prompts (what GRPO passes: ``n=group_size`` and its sampling settings)."""
    return {"n": group, "max_new_tokens": new_tokens, "temperature": TEMPERATURE, "top_p": TOP_P}


def generate_kwargs(tokenizer: Any, group: int, new_tokens: int, cache: str) -> dict[str, Any]:
    """What the benchmark passes to ``model.generate`` besides the input ids and mask."""
    kwargs = {
        "do_sample": True, "temperature": TEMPERATURE, "top_p": TOP_P, "top_k": TOP_K,
        "max_new_tokens": new_tokens, "num_return_sequences": group,
        "pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id,
    }  # fmt: skip
    if cache != "dynamic":
        kwargs["cache_implementation"] = cache
    return kwargs


def encode(tokenizer: Any, prompts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """The prompts as rlx's sampler encodes them: ``[bos] + prompt``, left padded."""
    from rlx.llm.batching import encode_prompt
    from rlx.llm.generation import left_pad

    return left_pad([encode_prompt(tokenizer, p) for p in prompts], tokenizer.pad_token_id)


def rlx_settings(model: Any, tokenizer: Any, prompts: Sequence[str], kwargs: dict[str, Any]):
    """rlx's side, read from what ``sample`` gets: its arguments, the tokenizer it encodes
    with and the model's dtype (``sample`` applies transformers' warpers for temperature and
    top-p, :func:`rlx.llm.generation._warpers`)."""
    from rlx.llm.generation import _warpers

    _, mask = encode(tokenizer, prompts)
    warpers = _warpers(kwargs["temperature"], kwargs["top_p"])
    return {
        "prompts": len(prompts),
        "prompt tokens, each prompt": mask.sum(1).tolist(),
        "samples per prompt": kwargs["n"],
        "sequences": len(prompts) * kwargs["n"],
        "new tokens (max)": kwargs["max_new_tokens"],
        "eos logit masked (every row N tokens)": eos_masked(model),
        "sampling": "multinomial",
        "temperature": kwargs["temperature"],
        "top-p": kwargs["top_p"],
        "top-k": "off",  # sample() has no top-k
        "logits processors": [type(w).__name__ for w in warpers],
        "eos token id": tokenizer.eos_token_id,
        "pad token id": tokenizer.pad_token_id,
        "dtype": str(next(model.parameters()).dtype),
        "device": str(next(model.parameters()).device),
        "torch threads": torch.get_num_threads(),
    }


def generate_settings(
    model: Any, ids: torch.Tensor, mask: torch.Tensor, kwargs: dict[str, Any]
) -> dict[str, Any]:
    """generate's side, read from the generation config it builds from the model's
    ``generation_config`` and ``kwargs``, the logits processors it derives from it, and the
    inputs it is given."""
    config, _ = model._prepare_generation_config(None, **kwargs)
    processors = model._get_logits_processor(config, input_ids_seq_length=ids.shape[1],
                                             device=str(ids.device))  # fmt: skip
    eos = config.eos_token_id
    return {
        "prompts": len(ids),
        "prompt tokens, each prompt": mask.sum(1).tolist(),
        "samples per prompt": config.num_return_sequences,
        "sequences": len(ids) * config.num_return_sequences,
        "new tokens (max)": config.max_new_tokens,
        "eos logit masked (every row N tokens)": eos_masked(model),
        "sampling": "multinomial" if config.do_sample and config.num_beams == 1 else "other",
        "temperature": config.temperature,
        "top-p": config.top_p,
        "top-k": "off" if not config.top_k else config.top_k,
        "logits processors": [type(p).__name__ for p in processors],
        "eos token id": eos[0] if isinstance(eos, list) and len(eos) == 1 else eos,
        "pad token id": config.pad_token_id,
        "dtype": str(model.dtype),
        "device": str(model.device),
        "torch threads": torch.get_num_threads(),
    }


def like_for_like(
    model: Any, tokenizer: Any, new_tokens: int, prompts: Sequence[str] = PROMPTS, group: int = G
) -> list[dict[str, Any]]:
    """rlx's settings against generate's, for each of generate's caches (rows prefixed
    ``dynamic:`` / ``static:``, which differ in the cache alone); every row must match."""
    ours = rlx_settings(model, tokenizer, prompts, rlx_kwargs(group, new_tokens))
    ids, mask = encode(tokenizer, prompts)
    rows = []
    for cache in PEERS.values():
        theirs = generate_settings(
            model, ids, mask, generate_kwargs(tokenizer, group, new_tokens, cache)
        )
        table = settings_table(ours, theirs)
        rows += [{**r, "setting": f"{cache}: {r['setting']}"} for r in table]
    return rows


# ---------------------------------------------------------------------------- the calls
def cut_at_eos(rows: list[list[int]], eos: int | None) -> list[list[int]]:
    """Each row up to and with its first eos (what ``sample`` returns)."""
    return [r[: r.index(eos) + 1] if eos is not None and eos in r else r for r in rows]


def call_rlx(model: Any, tokenizer: Any, prompts: Sequence[str], group: int, new_tokens: int):
    """One ``sample`` call: the completions as token id lists."""
    from rlx.llm.generation import sample

    return sample(model, tokenizer, prompts, **rlx_kwargs(group, new_tokens))


def call_generate(cache: str) -> Callable[..., list[list[int]]]:
    """A call of ``generate`` with ``cache``, over the same span as :func:`call_rlx`."""

    def call(model: Any, tokenizer: Any, prompts: Sequence[str], group: int, new_tokens: int):
        ids, mask = encode(tokenizer, prompts)
        out = model.generate(input_ids=ids, attention_mask=mask,
                             **generate_kwargs(tokenizer, group, new_tokens, cache))  # fmt: skip
        return cut_at_eos(out[:, ids.shape[1] :].tolist(), tokenizer.eos_token_id)

    return call


def call_floor(shared: bool) -> Callable[..., None]:
    """The forward passes alone: a prefill (of each prompt once, its cache then repeated
    ``group`` times, when ``shared``; of all rows otherwise) and ``new_tokens - 1``
    single-token passes with the cache, fed a fixed token: no processors, no sampling."""

    def call(model: Any, tokenizer: Any, prompts: Sequence[str], group: int, new_tokens: int):
        ids, mask = encode(tokenizer, prompts)
        if not shared:
            ids, mask = ids.repeat_interleave(group, 0), mask.repeat_interleave(group, 0)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=mask, position_ids=positions,
                        use_cache=True, **_keep_last(model))  # fmt: skip
            cache = out.get("cache")
            if cache is None:
                cache = out.get("past_key_values")
            if shared:
                cache.batch_repeat_interleave(group)
                mask = mask.repeat_interleave(group, 0)
                positions = positions.repeat_interleave(group, 0)
            position = positions[:, -1:]
            token = torch.full((len(mask), 1), tokenizer.bos_token_id or 0, dtype=torch.long)
            for _ in range(new_tokens - 1):
                mask = torch.cat([mask, mask.new_ones(len(mask), 1)], dim=1)
                position = position + 1
                out = model(input_ids=token, attention_mask=mask, position_ids=position,
                            use_cache=True, **{_cache_name(model): cache})  # fmt: skip

    return call


def _cache_name(model: Any) -> str:
    """The keyword ``model.forward`` takes its cache under (``cache`` or, before transformers
    5.x, ``past_key_values``)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _keep_last(model: Any) -> dict[str, int]:
    """``logits_to_keep=1`` where the model takes it (both samplers prefill with it)."""
    keeps = "logits_to_keep" in inspect.signature(model.forward).parameters
    return {"logits_to_keep": 1} if keeps else {}


CALLS = {
    RLX: call_rlx,
    DYNAMIC: call_generate("dynamic"),
    STATIC: call_generate("static"),
    FLOOR_SHARED: call_floor(shared=True),
    FLOOR_ROWS: call_floor(shared=False),
}


def measure(model, tokenizer, prompts, group, new_tokens, repeats) -> tuple[dict, dict]:
    """Seconds of every method per repeat, and the share of rlx's tokens equal to each
    generate cache's under the same seed (per repeat)."""
    for method in METHODS:  # warm-up, off the clocks
        CALLS[method](model, tokenizer, prompts, group, min(2, new_tokens))
    seconds: dict[str, list[float]] = {m: [] for m in METHODS}
    agreement: dict[str, list[float]] = {m: [] for m in PEERS}
    for repeat in range(repeats):
        order = METHODS[repeat % len(METHODS) :] + METHODS[: repeat % len(METHODS)]
        tokens = {}
        for method in order:
            torch.manual_seed(SEED + repeat)
            t0 = time.perf_counter()
            out = CALLS[method](model, tokenizer, prompts, group, new_tokens)
            seconds[method].append(time.perf_counter() - t0)
            if out is not None:
                lengths = {len(row) for row in out}
                if len(out) != len(prompts) * group or lengths != {new_tokens}:
                    raise RuntimeError(f"{method}: {len(out)} rows of lengths {lengths}, not "
                                       f"{len(prompts) * group} of {new_tokens}")  # fmt: skip
                tokens[method] = torch.tensor(out)
            print(f"N={new_tokens} repeat {repeat}: {method}: {seconds[method][-1]:.3f} s",
                  flush=True)  # fmt: skip
        for peer in PEERS:
            same = (tokens[RLX] == tokens[peer]).float().mean().item()
            agreement[peer].append(round(same, 4))
    return seconds, agreement


# ---------------------------------------------------------------------------- the report
def report(measured: dict[int, tuple[dict, dict]], sequences: int, args, like: list) -> None:
    """The table (per length and method), the goals and generation.json."""
    columns = ["new tokens", "method", "s per call, median", "s per call, min",
               "new tokens/s (median)", "rlx's speed / this (medians)",
               "rlx's speed / this (mins)", "time / floor, shared prefill (medians)",
               "time / floor, per-row prefill (medians)"]  # fmt: skip
    table, goals, figures, details = [], [], {}, {}
    for n, (seconds, agreement) in measured.items():
        s = {m: spread(seconds[m]) for m in METHODS}
        for m in METHODS:
            med = s[m]["median"]
            table.append([n, m, med, s[m]["min"], round(sequences * n / med, 1),
                          ratio(med, s[RLX]["median"]), ratio(s[m]["min"], s[RLX]["min"]),
                          ratio(med, s[FLOOR_SHARED]["median"]),
                          ratio(med, s[FLOOR_ROWS]["median"])])  # fmt: skip
        for m, cache in PEERS.items():
            figures[f"N{n}_rlx_speed_over_generate_{cache}"] = ratio(
                s[m]["median"], s[RLX]["median"]
            )
        faster = min(PEERS, key=lambda m: s[m]["median"])
        by = ratio(s[faster]["median"], s[RLX]["median"])
        goals.append(goal(f"N={n}: rlx at least as fast as generate's faster cache "
                          f"({faster.removeprefix('generate, ')})", "speed ratio >= 1", by,
                          by is not None and by >= 1.0))  # fmt: skip
        details[f"N={n}"] = {
            "seconds": s,
            "share of rlx's tokens equal to generate's (same seed)": agreement,
        }
        figures[f"N{n}_rlx_tokens_equal_to_generate_dynamic"] = min(agreement[DYNAMIC])
    prompts = sequences // args.group
    write_result(
        "generation",
        title="Sampling G completions per prompt: rlx's sampler vs transformers' generate",
        columns=columns,
        rows=table,
        libraries=LIBRARIES,
        repeats=args.repeats,
        seeds=[SEED],
        goals=goals,
        peer="transformers generate",
        settings=like,
        figures=figures,
        details=details,
        notes=f"Model {args.model_name}, float32, one torch thread. {prompts} prompts x "
        f"{args.group} samples = {sequences} sequences of exactly N new tokens (the "
        "eos logit masked to -inf on both sides by one hook on the shared model, each side's "
        "eos check left running), temperature 1, top-p 1, no top-k. Clocks: prompt strings to "
        "token id lists. Floors: the forward passes alone (prefill, then N - 1 single-token "
        "passes with a dynamic cache), with each prompt prefilled once and its cache repeated "
        "(rlx's passes) or all rows prefilled (generate's). Speed ratios: the method's seconds "
        f"over rlx's (above 1: rlx faster). {args.repeats} repeats, methods rotated, the same "
        "seed for every method in a repeat.",
        quick=args.quick,
        out_dir=args.out_dir,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL,
                        help="a Hugging Face causal LM folder (default: "
                             "models/smollm2-135m-instruct, from `make real-model`)")  # fmt: skip
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS),
                        help="new tokens per sequence, one measurement each")  # fmt: skip
    parser.add_argument("--repeats", type=int, default=MIN_REPEATS)
    parser.add_argument("--quick", action="store_true",
                        help="a tiny model built in code, tiny shapes, one repeat: checks that "
                             "it works")  # fmt: skip
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where generation.json goes (default benchmarks/results, --quick: "
                             "benchmarks/results/quick)")  # fmt: skip
    args = parser.parse_args()
    torch.set_num_threads(THREADS)
    prompts, group = list(PROMPTS), G
    if args.quick:
        args.repeats, args.lengths = 1, list(QUICK_LENGTHS)
        prompts, group = prompts[:QUICK_PROMPTS], QUICK_G
        folder = Path(tempfile.mkdtemp(prefix="bench-generation-"))
        model, tokenizer = tiny_model(folder / "tiny")
        args.model_name = "a tiny random Llama (rlx.llm.make_tiny_lm)"
    else:
        model, tokenizer = load(args.model)
        args.model_name = args.model.name
    if args.repeats < MIN_REPEATS and not args.quick:
        print(f"{args.repeats} repeats (a full run needs {MIN_REPEATS}): written as a quick "
              "run, a check that it works")  # fmt: skip
        args.quick = True
    args.group = group
    like: list[dict[str, Any]] = []
    first: dict[str, tuple] = {}
    for n in args.lengths:
        rows = like_for_like(model, tokenizer, n, prompts, group)
        bad = [r["setting"] for r in rows if r["must_match"] and not r["equal"]]
        if bad:
            raise SystemExit(f"not like for like at N={n}: {bad}")
        # the first length's rows in full; of the others, the rows that differ from them
        for r in rows:
            values = first.setdefault(r["setting"], (r["rlx"], r["peer"]))
            if n == args.lengths[0] or values != (r["rlx"], r["peer"]):
                like.append({**r, "setting": f"N={n}, {r['setting']}"})
    measured = {n: measure(model, tokenizer, prompts, group, n, args.repeats) for n in args.lengths}
    report(measured, len(prompts) * group, args, like)


if __name__ == "__main__":
    main()
