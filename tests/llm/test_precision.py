"""``precision="bf16-mixed"``: bfloat16 matmuls under autocast with float32 weights, the eager
attention only while training on CPU, the same learning as float32, for every stage."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

import torch
import torch.nn.functional as F

from rlx import llm
from rlx.errors import ConfigError
from rlx.llm.batching import encode_prompt_completions, pad_batch
from rlx.llm.models import load_model
from rlx.llm.precision import attention_for, autocast

TINY = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "max_length": 32}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("precision")
    sft_rows = llm.arithmetic_sft(64, seed=0)
    prefs = llm.arithmetic_preferences(64, seed=1)
    llm.write_jsonl(root / "sft.jsonl", sft_rows)
    llm.write_jsonl(root / "prefs.jsonl", prefs)
    llm.write_jsonl(root / "prompts.jsonl", llm.arithmetic(40, seed=0))
    texts = llm.task_texts(sft_rows + prefs)
    model = llm.make_tiny_lm(root / "tiny", texts=texts, **TINY)
    return root, model


def _loss_and_grads(model, batch, labels):
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    loss = F.cross_entropy(logits[:, :-1].float().flatten(0, 1), labels[:, 1:].flatten())
    grads = torch.autograd.grad(loss, [p for p in model.parameters()])
    return logits, loss, torch.cat([g.flatten() for g in grads])


def test_bf16_mixed_forward_and_gradient_are_close_to_float32(files):
    _, path = files
    model, tokenizer = load_model(path)
    rows = llm.arithmetic_sft(16, seed=5)
    encoded = encode_prompt_completions(
        tokenizer, [r.prompt for r in rows], [r.completion for r in rows], None
    )
    batch = pad_batch(encoded, tokenizer.pad_token_id)
    labels = batch.input_ids.masked_fill(~batch.loss_mask, -100)
    ref_logits, ref_loss, ref_grad = _loss_and_grads(model, batch, labels)
    assert model.config._attn_implementation == "sdpa"
    with attention_for(model, "fp32"), autocast("fp32", "cpu"):  # fp32: nothing changes
        assert model.config._attn_implementation == "sdpa"
        same_logits, _, _ = _loss_and_grads(model, batch, labels)
    assert torch.equal(same_logits, ref_logits)
    with attention_for(model, "bf16-mixed"):
        assert model.config._attn_implementation == "eager"
        with autocast("bf16-mixed", "cpu"):
            logits, loss, grad = _loss_and_grads(model, batch, labels)
    assert model.config._attn_implementation == "sdpa"  # restored
    assert logits.dtype == torch.bfloat16 and next(model.parameters()).dtype == torch.float32
    # bfloat16 keeps 8 significant bits: about 0.4% of each value, 0.02 on logits of a few units
    torch.testing.assert_close(logits.float(), ref_logits, atol=0.05, rtol=0.02)
    assert abs(loss.item() - ref_loss.item()) < 0.01
    assert F.cosine_similarity(grad, ref_grad, dim=0) > 0.999


def test_eager_attention_reaches_a_model_inside_a_wrapper(files):
    """A reward model wraps its sequence classifier: the switch finds it, and puts it back."""
    from rlx.llm.stages.reward_model import ScalarHeadRewardModel, sequence_classifier_from

    _, path = files
    classifier, _ = sequence_classifier_from(path, 0, "cpu", None)
    wrapper = ScalarHeadRewardModel(classifier)
    with attention_for(wrapper, "bf16-mixed"):
        assert classifier.config._attn_implementation == "eager"
        assert classifier.model.config._attn_implementation == "eager"
    assert classifier.config._attn_implementation == "sdpa"


def _metrics(run_dir):
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_sft_in_bf16_mixed_trains_like_float32_and_saves_a_plain_model(files, tmp_path):
    root, model = files
    losses = {}
    for precision in ("fp32", "bf16-mixed"):
        result = llm.sft(model, root / "sft.jsonl", run_dir=tmp_path / precision, steps=30,
                         batch_size=16, learning_rate=3e-3, eval_exact_match=False,
                         progress=False, precision=precision)  # fmt: skip
        losses[precision] = [row["loss"] for row in _metrics(tmp_path / precision)]
        saved = json.loads((result.model_dir / "config.json").read_text())
        assert "eager" not in json.dumps(saved)  # the eager attention was for training only
        loaded, _ = load_model(result.model_dir)
        assert loaded.config._attn_implementation == "sdpa"
        assert next(loaded.parameters()).dtype == torch.float32
    record = json.loads((tmp_path / "bf16-mixed" / "config.json").read_text())
    assert record["config"]["precision"] == "bf16-mixed"
    fp32, bf16 = losses["fp32"], losses["bf16-mixed"]
    assert abs(bf16[0] - fp32[0]) < 0.01  # the same start model, the same first batch
    assert fp32[-1] < 0.8 * fp32[0]  # it learned
    # the same trajectory up to bfloat16's rounding
    last_fp32, last_bf16 = sum(fp32[-5:]) / 5, sum(bf16[-5:]) / 5
    assert abs(last_bf16 - last_fp32) < 0.02 * last_fp32


@pytest.mark.parametrize("stage", ["rm", "dpo"])
def test_reward_model_and_dpo_train_in_bf16_mixed(files, tmp_path, stage):
    root, model = files
    train = {"rm": llm.reward_model, "dpo": llm.dpo}[stage]
    first = {}
    for precision in ("fp32", "bf16-mixed"):
        train(model, root / "prefs.jsonl", run_dir=tmp_path / precision, steps=4, batch_size=8,
              progress=False, precision=precision)  # fmt: skip
        first[precision] = _metrics(tmp_path / precision)[0]["loss"]
    assert first["bf16-mixed"] == pytest.approx(first["fp32"], abs=0.01)
    if stage == "dpo":  # the policy starts as the reference: loss log 2 in both precisions
        assert first["bf16-mixed"] == pytest.approx(0.6931, abs=0.01)


def test_grpo_and_rlhf_train_in_bf16_mixed(files, tmp_path):
    root, model = files
    result = llm.grpo(model, root / "prompts.jsonl", run_dir=tmp_path / "g", steps=2,
                      batch_size=2, group_size=4, max_new_tokens=4, progress=False,
                      precision="bf16-mixed")  # fmt: skip
    rows = _metrics(tmp_path / "g")
    assert rows[0]["kl_ref"] == 0.0  # policy and reference: the same weights, the same numerics
    assert all(torch.isfinite(torch.tensor([r["policy_loss"], r["entropy"]])).all() for r in rows)
    assert "eager" not in (result.model_dir / "config.json").read_text()
    rm = llm.reward_model(model, root / "prefs.jsonl", run_dir=tmp_path / "rm", steps=2,
                          kind="bow", progress=False)  # fmt: skip
    llm.rlhf(model, root / "prompts.jsonl", reward_model=rm.model_dir, run_dir=tmp_path / "r",
             steps=2, batch_size=4, minibatch_size=2, max_new_tokens=4, progress=False,
             precision="bf16-mixed")  # fmt: skip
    rows = _metrics(tmp_path / "r")
    assert rows[0]["kl_ref"] == 0.0
    assert all(torch.isfinite(torch.tensor([r["value_loss"], r["entropy"]])).all() for r in rows)


def test_an_unknown_precision_is_one_clear_error(files, tmp_path):
    root, model = files
    with pytest.raises(ConfigError, match="precision='fp16' must be one of fp32, bf16-mixed"):
        llm.sft(model, root / "sft.jsonl", run_dir=tmp_path / "r", precision="fp16")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("native", [True, False])
def test_bf16_mixed_on_a_cpu_without_bfloat16_warns_once(files, monkeypatch, capsys, native):
    """Without AVX512-BF16 or AMX, PyTorch emulates bfloat16 and a step runs many times slower
    than float32: the user hears it once per process; with them, nothing is said."""
    from rlx.llm import precision as P

    _, path = files
    model, _ = load_model(path)
    monkeypatch.setattr(P, "cpu_has_bf16", lambda: native)
    P._warn_emulated_bf16.cache_clear()
    for _ in range(2):
        with attention_for(model, "bf16-mixed"):
            pass
    with attention_for(model, "fp32"):
        pass
    err = capsys.readouterr().err
    if native:
        assert "bf16" not in err
    else:
        assert err.count("precision='bf16-mixed' on a CPU without bfloat16") == 1
        assert "precision='fp32'" in err
    P._warn_emulated_bf16.cache_clear()


def test_cpu_has_bf16_reads_the_bf16_flags():
    """Native bfloat16 is AVX512-BF16 or AMX: an AVX-512 CPU without them emulates it."""
    from rlx.llm.precision import cpu_has_bf16

    avx512 = frozenset({"avx2", "avx512f", "avx512bw", "avx512vl", "avx512dq"})
    assert cpu_has_bf16(avx512) is False
    assert cpu_has_bf16(avx512 | {"avx512_bf16"}) is True
    assert cpu_has_bf16(frozenset({"avx2", "amx_tile", "amx_bf16"})) is True
    assert cpu_has_bf16(frozenset({"avx2", "fma"})) is False


def test_cpu_has_bf16_agrees_with_this_machines_cpuinfo():
    from pathlib import Path

    from rlx.llm.precision import cpu_has_bf16

    info = Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.exists() else []
    flags = next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")),
                 None)  # fmt: skip
    if flags is None:
        pytest.skip("no x86 flags in /proc/cpuinfo on this machine")
    assert cpu_has_bf16() == ("avx512_bf16" in flags or "amx_bf16" in flags)
