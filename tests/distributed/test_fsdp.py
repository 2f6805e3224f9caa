"""FSDP (``fsdp=True``) under torch.distributed: two CPU processes (gloo on 127.0.0.1) shard a
tiny model's weights, gradients and AdamW state, train as one unsharded process does on the
same global batch, and write a run folder (checkpoints, model) as an unsharded run writes it,
which ``rlx.load`` reads and a resumed run continues from."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("transformers")

import rlx
from rlx import llm
from rlx.errors import ConfigError

FIELDS = {"steps": 4, "batch_size": 4, "grad_accum": 2, "eval_fraction": 0.25,
          "learning_rate": 1e-3, "eval_exact_match": False}  # fmt: skip

# one rank, as a user's script under torchrun; it also notes, for each run, the parameter,
# gradient and AdamW elements this process holds while training (its shards under FSDP)
RANK_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    import rlx
    import rlx.llm.training as training
    from rlx.llm.sharding import local_numel

    def local(tensor):
        return getattr(tensor, "_local_tensor", tensor).numel()

    held = {}
    make_optimizer = training.make_optimizer

    def noting(model, lr, weight_decay):
        optimizer = make_optimizer(model, lr, weight_decay)

        def before_step(opt, args, kwargs):
            held["parameters"] = local_numel(model)
            held["total"] = sum(p.numel() for p in model.parameters())
            held["gradients"] = sum(local(p.grad) for p in model.parameters())

        def after_step(opt, args, kwargs):
            held["adam"] = sum(local(s["exp_avg"]) for s in opt.state.values())

        optimizer.register_step_pre_hook(before_step)
        optimizer.register_step_post_hook(after_step)
        return optimizer

    training.make_optimizer = noting
    for algo, data, run_dir, fields, out in json.loads(sys.argv[1]):
        held.clear()
        rlx.train(algo, data, run_dir=run_dir, progress=False, **fields)
        with open(f"{out}.{os.environ['RANK']}.json", "w") as f:
            json.dump(held, f)
    """
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch(runs: list) -> None:
    """Two processes, as torchrun --nproc-per-node 2 starts them, training ``runs`` (algo,
    data, run folder, config fields, where to note the shard sizes) one after the other."""
    port = free_port()
    procs = []
    for rank in range(2):
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1",
               "RLX_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}  # fmt: skip
        args = [sys.executable, "-c", RANK_SCRIPT, json.dumps(runs)]
        procs.append(subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True))
    errors = [proc.communicate(timeout=300)[1] for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), "\n".join(errors)[-6000:]


def weights(model_dir) -> dict:
    from safetensors.torch import load_file

    return load_file(str(model_dir / "model.safetensors"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A tiny model built in code; SFT trained by one unsharded process and by two sharded
    ones with the same global batch (checkpointing every 2 steps), DPO by two sharded ones;
    then the sharded SFT run resumed from its step-2 checkpoint by two sharded processes."""
    root = tmp_path_factory.mktemp("fsdp")
    texts = [f"{a}+{b}={a + b}" for a in range(10) for b in range(10)]
    model = llm.make_tiny_lm(root / "m", texts=texts, hidden_size=32, num_layers=2,
                             num_heads=2)  # fmt: skip
    pairs = [(f"{a}+{b}=", str(a + b)) for a in range(4) for b in range(4)]
    (root / "sft.jsonl").write_text(
        "".join(json.dumps({"prompt": p, "completion": c}) + "\n" for p, c in pairs)
    )
    (root / "dpo.jsonl").write_text(
        "".join(json.dumps({"prompt": p, "chosen": c, "rejected": "0"}) + "\n" for p, c in pairs)
    )
    sft = {**FIELDS, "model": str(model)}
    llm.sft(model, root / "sft.jsonl", run_dir=root / "sft-one", progress=False, **FIELDS)
    launch([
        ["sft", str(root / "sft.jsonl"), str(root / "sft-fsdp"),
         {**sft, "fsdp": True, "checkpoint_every_steps": 2}, str(root / "held-sft")],
        ["dpo", str(root / "dpo.jsonl"), str(root / "dpo-fsdp"),
         {**FIELDS, "model": str(model), "fsdp": True, "eval_exact_match": True},
         str(root / "held-dpo")],
    ])  # fmt: skip
    # what the uninterrupted run ended with, before its folder is resumed from step 2
    (root / "sft-fsdp-whole.json").write_text(
        (root / "sft-fsdp" / "metrics.jsonl").read_text().splitlines()[-1]
    )
    import torch

    torch.save(weights(root / "sft-fsdp" / "model"), root / "sft-fsdp-whole.pt")
    launch([["sft", str(root / "sft.jsonl"), str(root / "sft-fsdp"),
             {"resume": True, "resume_from": 2}, str(root / "held-resumed")]])  # fmt: skip
    return root


def test_two_sharded_processes_train_as_one_unsharded(runs):
    """SFT: the same global batch on two FSDP processes ends at one process's weights (to
    float32 reduction order)."""
    import torch

    one, two = weights(runs / "sft-one" / "model"), torch.load(runs / "sft-fsdp-whole.pt")
    start = weights(runs / "m")
    assert one.keys() == two.keys()
    assert any(not torch.equal(one[k], start[k]) for k in one)  # it trained
    for key in one:
        torch.testing.assert_close(two[key], one[key], rtol=1e-4, atol=1e-5, msg=key)


@pytest.mark.parametrize("stage", ["sft", "dpo"])
def test_each_process_holds_half_the_weights_gradients_and_adam_state(runs, stage):
    held = [json.loads((runs / f"held-{stage}.{rank}.json").read_text()) for rank in (0, 1)]
    total = held[0]["total"]
    assert held[1]["total"] == total
    for kind in ("parameters", "gradients", "adam"):
        sizes = [h[kind] for h in held]
        assert sum(sizes) == total, (kind, sizes, total)
        assert all(0.4 * total <= size <= 0.6 * total for size in sizes), (kind, sizes)


def test_a_sharded_dpo_run_writes_a_checkpoint_rlx_load_reads(runs):
    run = runs / "dpo-fsdp"
    assert json.loads((run / "summary.json").read_text())["status"] == "completed"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4] and "exact_match" in rows[-1]
    agent = rlx.load(run)
    assert isinstance(agent.act("1+2="), str)
    import torch

    trained = weights(run / "model")
    state = agent.model.state_dict()
    for key, value in trained.items():
        torch.testing.assert_close(state[key], value, rtol=0, atol=0, msg=key)


def test_a_sharded_run_resumes_from_its_checkpoint_and_ends_as_the_uninterrupted_one(runs):
    import torch

    whole, resumed = torch.load(runs / "sft-fsdp-whole.pt"), weights(runs / "sft-fsdp" / "model")
    for key in whole:
        torch.testing.assert_close(resumed[key], whole[key], rtol=1e-5, atol=1e-6, msg=key)
    last = json.loads((runs / "sft-fsdp-whole.json").read_text())
    rows = [json.loads(x) for x in (runs / "sft-fsdp" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert rows[-1]["loss"] == pytest.approx(last["loss"], rel=1e-5)


def test_a_sharded_checkpoint_holds_what_an_unsharded_one_holds(runs):
    """Whole weights and an optimizer state keyed by parameter position, as one process
    writes them."""
    import torch

    def latest(run):
        return torch.load(runs / run / "checkpoints" / "latest", weights_only=True)["state"]

    one, two = latest("sft-one"), latest("sft-fsdp")
    assert one.keys() == two.keys()
    assert {k: v.shape for k, v in one["model"].items()} == {
        k: v.shape for k, v in two["model"].items()
    }
    assert one["optimizer"]["state"].keys() == two["optimizer"]["state"].keys()
    assert [g["params"] for g in one["optimizer"]["param_groups"]] == [
        g["params"] for g in two["optimizer"]["param_groups"]
    ]
    for key, moments in one["optimizer"]["state"].items():
        assert moments["exp_avg"].shape == two["optimizer"]["state"][key]["exp_avg"].shape


def test_fsdp_outside_torchrun_and_with_lora_is_one_sentence(tmp_path):
    texts = ["1+1=2"]
    model = llm.make_tiny_lm(tmp_path / "m", texts=texts, hidden_size=16, num_layers=1,
                             num_heads=2)  # fmt: skip
    data = [{"prompt": "1+1=", "completion": "2"}] * 4
    with pytest.raises(ConfigError, match=r"fsdp=True .* under torchrun"):
        llm.sft(model, data, run_dir=tmp_path / "a", fsdp=True, steps=1, progress=False)

    from rlx.llm.sharding import check_fsdp
    from rlx.llm.stages.dpo import DPOConfig

    config = DPOConfig(model=str(model), fsdp=True, lora=True)
    with pytest.raises(ConfigError, match=r"fsdp=True does not train a LoRA adapter"):
        check_fsdp(config, object(), "dpo", adapter=True)
