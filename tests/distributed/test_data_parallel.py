"""Data parallel under torch.distributed: two CPU processes (gloo on 127.0.0.1) train exactly
as one process does on the same global batch, and only rank 0 writes the run folder."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("transformers")

from rlx import llm
from rlx.distributed.data_parallel import TorchDataParallel, check_divisible
from rlx.errors import ConfigError, RunError

FIELDS = {"steps": 3, "batch_size": 4, "grad_accum": 2, "eval_fraction": 0.25,
          "learning_rate": 1e-3, "eval_exact_match": False}  # fmt: skip

# one rank, as a user's script under torchrun: rlx.train sees WORLD_SIZE, hands the stage its
# data-parallel part and lets rank 0 alone write the run folder
RANK_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import rlx

    for algo, data, run_dir, fields in json.loads(sys.argv[1]):
        rlx.train(algo, data, run_dir=run_dir, progress=False, **fields)
    """
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch(runs: list) -> None:
    """Two processes, as torchrun --nproc-per-node 2 starts them, training ``runs`` (algo,
    data, run folder, config fields) one after the other."""
    port = free_port()
    procs = []
    for rank in range(2):
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1",
               "CUDA_VISIBLE_DEVICES": ""}  # fmt: skip
        args = [sys.executable, "-c", RANK_SCRIPT, json.dumps(runs)]
        procs.append(subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True))
    errors = [proc.communicate(timeout=300)[1] for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), errors


def metrics(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A tiny chat model, SFT and DPO data; each stage trained by one process and by two
    with the same global batch, and GRPO by two."""
    root = tmp_path_factory.mktemp("dp")
    texts = [f"{a}+{b}={a + b}" for a in range(10) for b in range(10)]
    model = llm.make_tiny_chat_lm(root / "m", texts=texts, vocab_size=300, hidden_size=32,
                                  num_heads=2)  # fmt: skip
    rows = [{"prompt": [{"role": "user", "content": f"{a}+{b}="}], "completion": str(a + b)}
            for a in range(4) for b in range(4)]  # fmt: skip
    files = {"sft": root / "sft.jsonl", "dpo": root / "prefs.jsonl", "grpo": root / "q.jsonl"}
    shapes = {
        "sft": rows,
        "dpo": [{"prompt": r["prompt"], "chosen": r["completion"], "rejected": "0"} for r in rows],
        "grpo": [{"prompt": r["prompt"], "answer": r["completion"]} for r in rows],
    }
    for algo, path in files.items():
        path.write_text("".join(json.dumps(r) + "\n" for r in shapes[algo]))
    fields = {
        "sft": {**FIELDS, "model": str(model)},
        "dpo": {**FIELDS, "model": str(model), "pack_pairs": False},
        "grpo": {**FIELDS, "model": str(model), "group_size": 2, "max_new_tokens": 3},
    }
    # a new LoRA adapter is drawn on each process: they must draw the same one
    fields["sft-lora"] = {**fields["sft"], "lora": True, "lora_r": 2}
    files["sft-lora"] = files["sft"]
    for name, stage in (("sft", llm.sft), ("dpo", llm.dpo), ("sft-lora", llm.sft)):
        stage(model, files[name], run_dir=root / f"{name}-one", progress=False,
              **{k: v for k, v in fields[name].items() if k != "model"})  # fmt: skip
    launch([[name.split("-")[0], str(files[name]), str(root / f"{name}-two"), fields[name]]
            for name in ("sft", "dpo", "grpo", "sft-lora")])  # fmt: skip
    return root


@pytest.mark.parametrize("algo", ["sft", "dpo", "sft-lora"])
def test_two_processes_equal_one_with_the_same_global_batch(runs, algo):
    single, double = metrics(runs / f"{algo}-one"), metrics(runs / f"{algo}-two")
    assert len(single) == len(double) == FIELDS["steps"]
    for a, b in zip(single, double, strict=True):
        measured = [k for k in a if k not in ("step", "wall_s", "time") and "_s" not in k]
        assert "loss" in measured and "grad_norm" in measured and set(measured) <= set(b)
        for key in measured:
            assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-6), (key, a, b)
    assert (runs / f"{algo}-two" / "model" / "config.json").is_file()
    assert json.loads((runs / f"{algo}-two" / "summary.json").read_text())["status"] == "completed"


def test_grpo_runs_on_two_processes_and_rank_zero_writes(runs):
    rows = metrics(runs / "grpo-two")
    assert [row["step"] for row in rows] == [1, 2, 3]
    assert all(np.isfinite(row["policy_loss"]) and "reward/exact-match" in row for row in rows)
    assert (runs / "grpo-two" / "model" / "config.json").is_file()


def test_under_torchrun_every_process_must_name_the_run_folder(monkeypatch):
    import rlx

    monkeypatch.setenv("WORLD_SIZE", "2")
    # from Python the sentence names the argument, not the CLI flag
    with pytest.raises(RunError, match=r"pass run_dir=\.\.\.") as refused:
        rlx.train("sft", "data.jsonl", model="m")
    assert "--run-dir" not in str(refused.value)


def test_shards_cover_the_batch_and_sizes_must_divide():
    rows = np.arange(10)
    shards = [TorchDataParallel(rank, 3).shard(rows) for rank in range(3)]
    assert np.array_equal(np.concatenate(shards), rows)
    assert [len(s) for s in shards] == [4, 3, 3]

    class Config:
        batch_size, grad_accum = 6, 2

    with pytest.raises(ConfigError, match="multiple of 4"):
        check_divisible(Config(), 2)


def test_every_process_draws_the_same_new_adapter_whatever_its_random_stream(runs):
    """GRPO and RLHF-PPO seed each process's sampling stream with its rank before the model is
    built; the new adapter is drawn from the seed alone, and the stream is left as it was."""
    import dataclasses

    import torch

    from rlx import registry
    from rlx.llm.lora import new_adapter
    from rlx.llm.models import load_model

    config = dataclasses.replace(registry.get("grpo").config(), lora=True, lora_r=2, seed=3)
    adapters, draws = [], []
    for rank in (0, 1):
        torch.manual_seed(3 + rank)
        model = new_adapter(load_model(runs / "m")[0], config)
        draws.append(torch.rand(1).item())
        adapters.append({k: v for k, v in model.state_dict().items() if "lora_A" in k})
        torch.manual_seed(3 + rank)
        assert draws[-1] == torch.rand(1).item()  # the stream as if no adapter had been drawn
    assert adapters[0] and adapters[0].keys() == adapters[1].keys()
    assert all(torch.equal(adapters[0][k], adapters[1][k]) for k in adapters[0])
    assert draws[0] != draws[1]
