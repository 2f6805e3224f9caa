"""rlx.llm foundations: losses on hand-worked numbers, masks, batching invariants, model folders,
data files and generated tasks. Tiny models (hidden size 32) keep the file fast."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("transformers")

import torch
from safetensors.torch import load_file

from rlx import llm
from rlx.errors import ConfigError, RLXError
from rlx.llm import batching, logprobs, losses, models, rewards, tasks

TINY = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "max_length": 32}


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    return models.make_tiny_lm(tmp_path_factory.mktemp("tiny") / "llama", **TINY, seed=0)


@pytest.fixture(scope="module")
def tiny(tiny_path):
    model, tokenizer = llm.load_model(tiny_path)
    model.eval()  # no dropout: compared forward passes must be deterministic
    return model, tokenizer


def _batch(tokenizer, rows, max_length=32):
    seqs = batching.encode_prompt_completions(
        tokenizer, [p for p, _ in rows], [c for _, c in rows], max_length
    )
    return batching.pad_batch(seqs, tokenizer.pad_token_id)


ROWS = [
    ("23+58=", "81"),
    ("1+2=", "3"),
    ("99+99=", "198"),
    ("7+5=", "12"),
    ("10+90=", "100"),
    ("4+4=", "8"),
    ("45+11=", "56"),
    ("3+30=", "33"),
]


# --- losses on hand-worked numbers --------------------------------------------------------------


def test_bradley_terry_matches_hand_numbers():
    r_chosen = torch.tensor([2.0, 0.0])
    r_rejected = torch.tensor([0.5, 1.0])
    loss, m = losses.bradley_terry_loss(r_chosen, r_rejected)
    # margins 1.5 and -1: -log sigma(x) = log(1 + e^-x)
    expected = 0.5 * (-math.log(1 / (1 + math.exp(-1.5))) - math.log(1 / (1 + math.exp(1.0))))
    assert float(loss) == pytest.approx(expected, rel=1e-6)
    assert float(m["loss"]) == pytest.approx(expected, rel=1e-6)
    assert float(m["pair_accuracy"]) == 0.5
    assert float(m["reward_margin"]) == pytest.approx(0.25)
    assert float(m["chosen_reward"]) == pytest.approx(1.0)
    assert float(m["rejected_reward"]) == pytest.approx(0.75)


def test_dpo_matches_hand_numbers():
    beta = 0.1
    pc, pr = torch.tensor([-5.0, -3.0]), torch.tensor([-7.0, -2.0])
    rc, rr = torch.tensor([-6.0, -3.0]), torch.tensor([-6.0, -2.5])
    loss, m = losses.dpo_loss(pc, pr, rc, rr, beta=beta)
    # chosen log-ratios (1, 0), rejected (-1, 0.5): beta * difference = (0.2, -0.05)
    expected = 0.5 * (math.log(1 + math.exp(-0.2)) + math.log(1 + math.exp(0.05)))
    assert float(loss) == pytest.approx(expected, rel=1e-6)
    assert float(m["chosen_reward"]) == pytest.approx(0.1 * 0.5)
    assert float(m["rejected_reward"]) == pytest.approx(0.1 * -0.25)
    assert float(m["reward_margin"]) == pytest.approx(0.075)
    assert float(m["pair_accuracy"]) == 0.5
    assert float(m["log_ratio_ref"]) == pytest.approx((1 + 0 - 1 + 0.5) / 4)


def test_dpo_is_log2_at_the_reference_and_its_gradient_raises_chosen_lowers_rejected():
    beta, B = 0.1, 4
    ref_c, ref_r = torch.randn(B), torch.randn(B)
    pc, pr = ref_c.clone().requires_grad_(), ref_r.clone().requires_grad_()
    loss, m = losses.dpo_loss(pc, pr, ref_c, ref_r, beta=beta)
    assert float(loss.detach()) == pytest.approx(math.log(2), rel=1e-6)
    assert float(m["log_ratio_ref"]) == 0.0
    loss.backward()
    # sigma(0) = 1/2: dL/d log pi(y+) = -beta / 2 / B, dL/d log pi(y-) = +beta / 2 / B
    torch.testing.assert_close(pc.grad, torch.full((B,), -beta / 2 / B))
    torch.testing.assert_close(pr.grad, torch.full((B,), beta / 2 / B))


def test_dpo_swapping_chosen_and_rejected_negates_the_margin():
    torch.manual_seed(1)
    pc, pr, rc, rr = (torch.randn(6) for _ in range(4))
    _, m = losses.dpo_loss(pc, pr, rc, rr, beta=0.2)
    _, swapped = losses.dpo_loss(pr, pc, rr, rc, beta=0.2)
    assert float(swapped["reward_margin"]) == pytest.approx(-float(m["reward_margin"]))
    assert float(swapped["chosen_reward"]) == pytest.approx(float(m["rejected_reward"]))
    assert float(swapped["pair_accuracy"]) == pytest.approx(1 - float(m["pair_accuracy"]))
    assert float(swapped["log_ratio_ref"]) == pytest.approx(float(m["log_ratio_ref"]))


@pytest.mark.parametrize("beta", [0.0, -0.1, float("nan")])
def test_dpo_rejects_a_non_positive_beta(beta):
    x = torch.zeros(2)
    with pytest.raises(ConfigError, match="beta"):
        losses.dpo_loss(x, x, x, x, beta=beta)


def test_sft_loss_matches_cross_entropy_at_target_positions():
    # one row: tokens [bos, a, b, c, eos, pad]; targets are c (t=3) and eos (t=4)
    # and [bos, a, b, c, eos, d] with targets eos (t=4) and d (t=5)
    batch = batching.pad_batch(
        [
            batching.EncodedSequence([1, 5, 6, 7, 2], [False] * 3 + [True] * 2, 3),
            batching.EncodedSequence([1, 5, 6, 7, 2, 4], [False] * 4 + [True] * 2, 4),
        ],
        pad_id=0,
    )
    torch.manual_seed(0)
    logits = torch.randn(2, 6, 8)
    loss, m = losses.sft_loss(logits, batch)
    logp = torch.log_softmax(logits, dim=-1)
    picked = [logp[0, 2, 7], logp[0, 3, 2], logp[1, 3, 2], logp[1, 4, 4]]
    assert float(loss) == pytest.approx(-sum(float(v) for v in picked) / 4, rel=1e-6)
    predicted = logits.argmax(-1)
    hits = [predicted[0, 2] == 7, predicted[0, 3] == 2, predicted[1, 3] == 2, predicted[1, 4] == 4]
    assert float(m["token_accuracy"]) == pytest.approx(sum(map(int, hits)) / 4)


# --- masks and padding --------------------------------------------------------------------------


def test_encoding_masks_the_completion_and_eos_only(tiny):
    _, tok = tiny
    seq = batching.encode_prompt_completion(tok, "23+58=", "81", max_length=32)
    assert seq.input_ids[0] == tok.bos_token_id
    assert seq.input_ids[-1] == tok.eos_token_id
    assert seq.prompt_length == 1 + len("23+58=")
    assert seq.loss_mask == [False] * seq.prompt_length + [True] * 3  # "8", "1", eos
    assert tok.decode(seq.input_ids[seq.prompt_length : -1]) == "81"

    batch = batching.pad_batch([seq, batching.encode_prompt_completion(tok, "1+2=", "3", 32)], 0)
    assert batch.input_ids.shape == batch.loss_mask.shape == (2, 10)
    assert batch.attention_mask[1].tolist() == [1] * 7 + [0] * 3  # right padding
    assert not batch.loss_mask[1, 7:].any()
    assert batching.completion_lengths(batch).tolist() == [3, 2]


def test_truncation_cuts_the_completion_tail_and_rejects_a_prompt_that_fills_max_length(tiny):
    _, tok = tiny
    seq = batching.encode_prompt_completion(tok, "1+2=", "12345", max_length=7)
    assert len(seq.input_ids) == 7 and sum(seq.loss_mask) == 2  # eos and "345" cut
    with pytest.raises(ConfigError, match="max_length=5"):
        batching.encode_prompt_completion(tok, "1234+5=", "6", max_length=5)


def test_padding_content_changes_no_logprob_or_loss(tiny):
    model, tok = tiny
    batch = _batch(tok, ROWS[:4])
    with torch.no_grad():
        logits = batching.forward_logits(model, batch)
        token_lp = logprobs.token_logprobs(model, batch)
        seq_lp = logprobs.sequence_logprobs(model, batch)
        sft, _ = losses.sft_loss(logits, batch)
        # put arbitrary tokens where the padding is: the real tokens never attend to them
        ids = batch.input_ids.clone()
        pads = batch.attention_mask == 0
        assert pads.any()
        ids[pads] = 7
        other = batching.TokenBatch(ids, batch.attention_mask, batch.loss_mask)
        other_logits = batching.forward_logits(model, other)
        real = batch.attention_mask.bool()
        torch.testing.assert_close(other_logits[real], logits[real])
        torch.testing.assert_close(logprobs.token_logprobs(model, other), token_lp)
        torch.testing.assert_close(logprobs.sequence_logprobs(model, other), seq_lp)
        torch.testing.assert_close(losses.sft_loss(other_logits, other)[0], sft)
    assert torch.all(token_lp[~batch.target_mask] == 0)


def test_padded_rows_score_like_unpadded_ones(tiny):
    model, tok = tiny
    with torch.no_grad():
        together = logprobs.sequence_logprobs(model, _batch(tok, ROWS))
        alone = torch.cat([logprobs.sequence_logprobs(model, _batch(tok, [r])) for r in ROWS])
    torch.testing.assert_close(together, alone, rtol=1e-5, atol=1e-5)


def test_logits_at_non_target_positions_do_not_reach_the_sft_loss(tiny):
    _, tok = tiny
    batch = _batch(tok, ROWS[:3])
    torch.manual_seed(0)
    logits = torch.randn(*batch.input_ids.shape, 50, requires_grad=True)
    loss, _ = losses.sft_loss(logits, batch)
    loss.backward()
    # logits at t-1 predict token t: only columns before a target token get gradient
    predicts_target = torch.zeros_like(batch.loss_mask)
    predicts_target[:, :-1] = batch.target_mask
    assert torch.all(logits.grad[~predicts_target] == 0)
    assert torch.all(logits.grad[predicts_target].abs().sum(-1) > 0)

    with torch.no_grad():
        changed = logits.detach().clone()
        changed[~predicts_target] += 5 * torch.randn_like(changed[~predicts_target])
        torch.testing.assert_close(losses.sft_loss(changed, batch)[0], loss.detach())


# --- one batch of 8 versus 8 accumulated batches of 1 -------------------------------------------


def _grads(model):
    return [p.grad.detach().clone() for p in model.parameters()]


def _accumulated(model, tok, per_row_loss):
    model.zero_grad()
    for row in ROWS:
        per_row_loss(_batch(tok, [row])).backward()
    return _grads(model)


def _assert_same_grads(a, b):
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-6)


def test_sft_gradient_is_invariant_to_splitting_with_token_count_normalisation(tiny):
    model, tok = tiny
    full = _batch(tok, ROWS)
    total_tokens = int(full.target_mask.sum())

    model.zero_grad()
    losses.sft_loss(batching.forward_logits(model, full), full)[0].backward()
    whole = _grads(model)

    def micro(batch):
        logits = batching.forward_logits(model, batch)
        return losses.sft_loss(logits, batch, num_target_tokens=total_tokens)[0]

    _assert_same_grads(whole, _accumulated(model, tok, micro))

    # the per-micro-batch mean weighs tokens of short completions more: a different gradient
    def naive(batch):
        return losses.sft_loss(batching.forward_logits(model, batch), batch)[0] / len(ROWS)

    naive_grads = _accumulated(model, tok, naive)
    assert not all(torch.allclose(x, y, atol=1e-6) for x, y in zip(whole, naive_grads, strict=True))
    model.zero_grad()


def test_sequence_level_gradient_is_invariant_to_splitting(tiny):
    # a loss that is a mean over sequences splits into micro-batch sums divided by the full B
    model, tok = tiny
    model.zero_grad()
    (-logprobs.sequence_logprobs(model, _batch(tok, ROWS)).mean()).backward()
    whole = _grads(model)

    def micro(batch):
        return -logprobs.sequence_logprobs(model, batch).sum() / len(ROWS)

    _assert_same_grads(whole, _accumulated(model, tok, micro))
    model.zero_grad()


# --- model folders ------------------------------------------------------------------------------


def test_tiny_lm_loads_with_plain_transformers_and_round_trips_characters(tiny_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_path)
    tok = AutoTokenizer.from_pretrained(tiny_path)
    ids = tok("23+58=81", add_special_tokens=False)["input_ids"]
    assert len(ids) == 8 and tok.unk_token_id not in ids
    assert tok.decode(ids) == "23+58=81"
    assert tok.decode([tok.bos_token_id, *ids, tok.eos_token_id], skip_special_tokens=True) == (
        "23+58=81"
    )
    assert tok.decode(tok(" a b ", add_special_tokens=False)["input_ids"]) == " a b "
    assert (tok.pad_token, tok.bos_token, tok.eos_token, tok.unk_token) == models.SPECIAL_TOKENS
    assert model.get_input_embeddings().num_embeddings == len(tok)
    assert tok("%", add_special_tokens=False)["input_ids"] == [tok.unk_token_id]


def test_tiny_lm_vocabulary_comes_from_texts(tmp_path):
    path = models.make_tiny_lm(tmp_path / "m", texts=["12+34=46"], **TINY)
    _, tok = llm.load_model(path)
    assert len(tok) == 4 + len(set("12+34=46"))
    assert tok.padding_side == "right"


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_default_tiny_lm_size_and_determinism(tmp_path, arch):
    a = models.make_tiny_lm(tmp_path / "a", arch=arch, seed=3)
    b = models.make_tiny_lm(tmp_path / "b", arch=arch, seed=3)
    c = models.make_tiny_lm(tmp_path / "c", arch=arch, seed=4)
    model, _ = llm.load_model(a)
    assert 500_000 <= models.count_parameters(model) <= 1_000_000
    wa, wb, wc = (load_file(p / "model.safetensors") for p in (a, b, c))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not all(torch.equal(wa[k], wc[k]) for k in wa)


def _plain_tokenizer(with_eos: bool):
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers import models as tok_models
    from transformers import PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate("0123456789+=")}
    specials = {}
    if with_eos:
        vocab["</s>"] = len(vocab)
        specials["eos_token"] = "</s>"
    vocab["[UNK]"] = len(vocab)
    backend = Tokenizer(tok_models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", **specials)


@pytest.mark.parametrize("with_eos", [True, False])
def test_a_folder_saved_by_plain_transformers_loads_without_a_pad_token(tmp_path, with_eos):
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = _plain_tokenizer(with_eos)
    assert tok.pad_token is None
    config = GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=1, n_head=2, n_positions=32)
    GPT2LMHeadModel(config).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)

    model, loaded = llm.load_model(tmp_path, dtype="float32")
    assert loaded.pad_token is not None and loaded.padding_side == "right"
    assert len(loaded) == len(tok) + (0 if with_eos else 1)  # a new <pad> only without eos
    if with_eos:
        assert loaded.pad_token_id == loaded.eos_token_id
    assert model.get_input_embeddings().num_embeddings == len(loaded)
    assert model.config.pad_token_id == loaded.pad_token_id
    batch = _batch(loaded, [("12+3=", "15"), ("1+1=", "2")])
    assert logprobs.sequence_logprobs(model, batch).shape == (2,)


def test_load_model_dtype(tiny_path):
    model, _ = llm.load_model(tiny_path, dtype="bfloat16")
    assert next(model.parameters()).dtype == torch.bfloat16
    with pytest.raises(ConfigError, match="float32"):
        llm.load_model(tiny_path, dtype="float64")


# --- bad input ----------------------------------------------------------------------------------


def test_missing_folder_and_folder_without_config(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(ConfigError, match="nowhere") as err:
        llm.load_model(missing)
    assert "does not exist" in str(err.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"config\.json") as err:
        llm.load_model(tmp_path / "empty")
    assert str(tmp_path / "empty") in str(err.value)


def test_non_causal_configs_are_rejected_with_the_path(tmp_path):
    from transformers import BertConfig, GPT2Config, T5Config

    small = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2}
    BertConfig(intermediate_size=64, **small).save_pretrained(tmp_path / "bert")
    T5Config(d_model=32, num_layers=1, num_heads=2).save_pretrained(tmp_path / "t5")
    GPT2Config(architectures=["GPT2ForSequenceClassification"]).save_pretrained(tmp_path / "cls")
    for name in ("bert", "t5", "cls"):
        with pytest.raises(ConfigError, match="not a causal language model") as err:
            llm.load_model(tmp_path / name)
        assert str(tmp_path / name) in str(err.value)


def test_bad_device_and_bad_tiny_sizes(tiny_path, tmp_path):
    with pytest.raises(ConfigError, match="device"):
        llm.load_model(tiny_path, device="gpu0")
    with pytest.raises(ConfigError, match="arch"):
        llm.make_tiny_lm(tmp_path, arch="bert")
    with pytest.raises(ConfigError, match="multiple of num_heads"):
        llm.make_tiny_lm(tmp_path, hidden_size=30, num_heads=4)


def test_missing_extra_is_one_clear_sentence(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "transformers" else real(name)
    )
    with pytest.raises(RLXError, match=r"pip install 'rlx\[llm\]'"):
        llm._require_extra()


# --- data files ---------------------------------------------------------------------------------


def test_jsonl_round_trip_skips_blank_lines(tmp_path):
    sft, prefs, ver = (
        tasks.arithmetic_sft(3),
        tasks.arithmetic_preferences(3),
        tasks.arithmetic(3),
    )
    assert tasks.load_sft_jsonl(tasks.write_jsonl(tmp_path / "s.jsonl", sft)) == sft
    assert tasks.load_preferences_jsonl(tasks.write_jsonl(tmp_path / "p.jsonl", prefs)) == prefs
    path = tmp_path / "v.jsonl"
    path.write_text('\n{"prompt": "1+1=", "answer": "2", "extra": 1}\n\n   \n', encoding="utf-8")
    assert tasks.load_verifier_jsonl(path) == [tasks.VerifierExample("1+1=", "2")]
    assert tasks.load_verifier_jsonl(tasks.write_jsonl(path, ver)) == ver


def test_empty_and_missing_data_files(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"empty\.jsonl.*is empty"):
        tasks.load_sft_jsonl(empty)
    with pytest.raises(ConfigError, match="does not exist"):
        tasks.load_sft_jsonl(tmp_path / "none.jsonl")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"prompt": "1+1=", "chosen": "2"}', r"line 2: missing field 'rejected'"),
        ('{"prompt": "1+1=", "chosen": "2", "rejected": 3}', r"line 2: field 'rejected'.*string"),
        ('{"prompt": "1+1=", "chosen": "2",', r"line 2: not valid JSON"),
        ('["1+1=", "2", "3"]', r"line 2: expected a JSON object"),
    ],
)
def test_malformed_line_names_file_line_and_field(tmp_path, line, expected):
    path = tmp_path / "prefs.jsonl"
    good = json.dumps({"prompt": "1+2=", "chosen": "3", "rejected": "4"})
    path.write_text(f"{good}\n{line}\n{good}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=expected) as err:
        tasks.load_preferences_jsonl(path)
    assert str(path) in str(err.value)


# --- rewards and generated tasks ----------------------------------------------------------------


def test_exact_match_reward_and_registry():
    reward = rewards.get_reward("exact-match")
    assert reward(["1+1=", "2+2="], [" 2 ", "5"], answers=["2", "4"]) == [1.0, 0.0]
    with pytest.raises(ConfigError, match="answers"):
        reward(["1+1="], ["2"])
    assert rewards.get_reward(len) is len
    with pytest.raises(ConfigError, match="exact-match") as err:
        rewards.get_reward("bleu")
    assert "'bleu'" in str(err.value)


def test_arithmetic_tasks_are_deterministic_and_correct():
    rows = tasks.arithmetic(50, seed=7)
    assert rows == tasks.arithmetic(50, seed=7) != tasks.arithmetic(50, seed=8)
    for row in rows:
        a, b = row.prompt.rstrip("=").split("+")
        assert 10 <= int(a) <= 99 and 10 <= int(b) <= 99
        assert row.answer == str(int(a) + int(b))
    assert [(r.prompt, r.completion) for r in tasks.arithmetic_sft(50, 7)] == [
        (r.prompt, r.answer) for r in rows
    ]

    prefs = tasks.arithmetic_preferences(200, seed=7)
    assert prefs == tasks.arithmetic_preferences(200, seed=7)
    prompts = [p.prompt for p in prefs]
    assert tasks.gold_reward(prompts, [p.chosen for p in prefs]) == [1.0] * 200
    assert tasks.gold_reward(prompts, [p.rejected for p in prefs]) == [0.0] * 200
    assert all(len(p.chosen) == len(p.rejected) for p in prefs)
    with pytest.raises(ConfigError, match="n=0"):
        tasks.arithmetic(0)


def test_length_biased_preferences_prefer_the_longer_completion():
    prefs = tasks.length_biased_preferences(400, seed=1, bias=0.3)
    assert prefs == tasks.length_biased_preferences(400, seed=1, bias=0.3)
    prompts = [p.prompt for p in prefs]
    gold_chosen = tasks.gold_reward(prompts, [p.chosen for p in prefs])
    assert all(len(p.chosen) >= len(p.rejected) for p in prefs)
    length_rows = [p for p, g in zip(prefs, gold_chosen, strict=True) if g == 0.0]
    assert all(p.chosen.endswith("!") and len(p.chosen) > len(p.rejected) for p in length_rows)
    assert 0.2 < len(length_rows) / len(prefs) < 0.4  # about bias of the rows
    assert tasks.gold_reward(["23+58="], ["81!!"]) == [0.0]
    with pytest.raises(ConfigError, match="23\\+58="):
        tasks.gold_reward(["what is two plus two?"], ["4"])
