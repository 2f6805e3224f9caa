"""Real models: a Qwen2-class model with a BPE tokenizer and a chat template built in code,
data in TRL's shapes from files and `datasets`, BPE token boundaries, TRL-style rewards, LoRA
with the adapter-disabled reference, device and memory fields, and every stage end to end."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")
pytest.importorskip("peft")

import torch

from rlx import llm
from rlx.errors import ConfigError
from rlx.llm import batching, data, lora, rewards
from rlx.llm.models import make_tiny_chat_lm

QA = [("What is the capital of France?", "Paris."), ("What is 2+2?", "4"),
      ("Name a colour.", "Blue."), ("What is the capital of Italy?", "Rome.")]  # fmt: skip
TEXTS = ["The capital of France is Paris."] * 20 + [q + " " + a for q, a in QA] * 10
SMALL = {"steps": 2, "batch_size": 2, "eval_fraction": 0.25, "progress": False}


def chat(question: str, answer: str | None = None) -> list[dict[str, str]]:
    turns = [{"role": "user", "content": question}]
    return turns + ([{"role": "assistant", "content": answer}] if answer is not None else [])


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    """A tiny Qwen2 chat model, saved as a Hugging Face folder."""
    folder = tmp_path_factory.mktemp("real") / "qwen"
    return make_tiny_chat_lm(folder, texts=TEXTS, vocab_size=300, hidden_size=32, num_heads=2)


# --- the model factory and token boundaries ----------------------------------------------------


def test_tiny_chat_model_loads_as_a_users_model(qwen):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(qwen)
    tokenizer = AutoTokenizer.from_pretrained(qwen)
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.chat_template
    text = tokenizer.apply_chat_template(chat("Hi", "Hello"), tokenize=False)
    assert text == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n"


def test_completion_tokens_are_those_generated_after_the_prompt(qwen):
    """BPE merges across the boundary: tokenising the joined text gives ' Paris', while the
    model, after the prompt's ' ', generates 'Paris'. rlx keeps the generated tokens."""
    _, tokenizer = llm.load_model(qwen)
    prompt, completion = "The capital of France is ", "Paris."
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    completion_ids = tokenizer(completion, add_special_tokens=False)["input_ids"]
    joined = tokenizer(prompt + completion, add_special_tokens=False)["input_ids"]
    assert joined != prompt_ids + completion_ids  # the naive way differs
    seq = batching.encode_prompt_completion(tokenizer, prompt, completion, max_length=64)
    assert seq.input_ids == prompt_ids + completion_ids + [tokenizer.eos_token_id]
    targets = [t for t, m in zip(seq.input_ids, seq.loss_mask, strict=True) if m]
    assert targets == [*completion_ids, tokenizer.eos_token_id]


def test_chat_rows_train_on_the_assistant_tokens_only(qwen):
    _, tokenizer = llm.load_model(qwen)
    conversation = [*chat("What is 2+2?", "4"), *chat("And 3+3?", "6")]
    (seq,) = batching.encode_conversations(tokenizer, [conversation], max_length=128)
    trained = [t for t, m in zip(seq.input_ids, seq.loss_mask, strict=True) if m]
    assert tokenizer.decode(trained) == "4<|im_end|>6<|im_end|>"
    # prompt + completion form: the generation prompt is context, the answer and eos targets
    (seq,) = batching.encode_prompt_completions(tokenizer, [chat("What is 2+2?")], ["4"], 128)
    assert tokenizer.decode(seq.input_ids).endswith("<|im_start|>assistant\n4<|im_end|>")
    trained = [t for t, m in zip(seq.input_ids, seq.loss_mask, strict=True) if m]
    assert tokenizer.decode(trained) == "4<|im_end|>"
    prompt_ids = batching.encode_prompt(tokenizer, chat("What is 2+2?"))
    assert tokenizer.decode(prompt_ids).endswith("<|im_start|>assistant\n")


def test_too_long_rows_are_cut_with_one_warning_that_counts_them(qwen):
    _, tokenizer = llm.load_model(qwen)
    with pytest.warns(batching.TruncationWarning, match="2 of 3 rows"):
        batching.encode_prompt_completions(
            tokenizer, ["a", "b", "c"], ["x " * 40, "y " * 40, "z"], max_length=10
        )


# --- data sources and shapes ---------------------------------------------------------------------


def test_every_source_gives_the_same_rows(tmp_path):
    import datasets

    rows = [{"prompt": "1+1=", "answer": "2"}, {"prompt": "2+2=", "answer": "4"}]
    frame = datasets.Dataset.from_list(rows)
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "d.json").write_text(json.dumps(rows))
    frame.to_csv(tmp_path / "d.csv", index=False)
    frame.to_parquet(tmp_path / "d.parquet")
    datasets.DatasetDict({"train": frame, "test": frame.select([0])}).save_to_disk(tmp_path / "s")
    sources = [rows, frame, datasets.DatasetDict({"train": frame}), *(
        tmp_path / name for name in ("d.jsonl", "d.json", "d.csv", "d.parquet", "s"))]  # fmt: skip
    for source in sources:
        assert list(data.read_rows(source)) == rows, source
    assert list(data.read_rows(tmp_path / "s", split="test")) == rows[:1]
    with pytest.raises(ConfigError, match="no split 'dev'"):
        data.read_rows(frame.train_test_split(0.5), split="dev")


def test_trl_shapes_and_the_one_sentence_error():
    sft = data.sft_examples([{"text": "hello"}, {"prompt": "a", "completion": "b"},
                             {"messages": chat("q", "a")}])  # fmt: skip
    assert [type(row).__name__ for row in sft] == ["SFTExample", "SFTExample", "ChatExample"]
    implicit = {"chosen": chat("q", "good"), "rejected": chat("q", "bad")}
    (pair,) = data.preference_pairs([implicit])
    assert pair.prompt == chat("q") and pair.chosen[0]["content"] == "good"
    (row,) = data.prompt_rows([{"prompt": chat("q"), "answer": "4", "tests": "assert f()"}])
    assert row.answer == "4" and row.columns["tests"] == "assert f()"
    with pytest.raises(ConfigError) as err:
        data.sft_examples([{"question": "q", "reply": "a"}])
    message = str(err.value)
    assert "data row 0" in message and "['question', 'reply']" in message
    assert "'messages'" in message and "\n" not in message


# --- rewards as TRL users write them -------------------------------------------------------------


def test_trl_style_rewards_get_columns_by_name_none_and_weights():
    seen = {}

    def uses_answer(prompts, completions, answer, **kwargs):
        seen.update(kwargs)
        return [1.0 if c == a else 0.0 for c, a in zip(completions, answer, strict=True)]

    def no_opinion_on_second(prompts, completions, **kwargs):
        return [0.5, None]

    scores, metrics = rewards.reward_set([uses_answer, no_opinion_on_second], [1.0, 2.0]).score(
        ["p", "q"], ["4", "5"], {"answer": ["4", "4"], "tests": ["t1", "t2"]}
    )
    assert scores.tolist() == [2.0, 0.0]  # 1 + 2 * 0.5, then 0 + (None: no opinion)
    assert metrics == {"reward/uses_answer": 0.5, "reward/no_opinion_on_second": 0.5}
    assert seen["tests"] == ["t1", "t2"]


def test_math_and_format_rewards():
    pytest.importorskip("math_verify")
    math_reward = rewards.get_reward("math")
    half = "$\\frac{1}{2}$"
    got = math_reward(["q"] * 4, ["\\boxed{\\frac{1}{2}}", "0.5", "1/3", "x"],
                      answer=[half, half, half, "???"])  # fmt: skip
    assert got[:3] == [1.0, 1.0, 0.0] and got[3] in (None, 0.0)
    fmt = rewards.get_reward("format")
    good = [{"role": "assistant", "content": "<think>2+2</think> <answer>4</answer>"}]
    assert fmt(["q", "q"], [good, "4"]) == [1.0, 0.0]


# --- LoRA ----------------------------------------------------------------------------------------


def test_lora_given_as_dict_or_loraconfig_becomes_the_config_fields():
    from peft import LoraConfig

    fields = lora.lora_fields({"lora": {"r": 4, "lora_alpha": 8}})
    assert fields == {"lora": True, "lora_r": 4, "lora_alpha": 8}
    config = LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"])
    fields = lora.lora_fields({"lora": config})
    assert fields["lora_r"] == 2 and fields["lora_target_modules"] == ("q_proj", "v_proj")
    with pytest.raises(ConfigError, match="use_dora"):
        lora.lora_fields({"lora": {"use_dora": True}})


def test_the_lora_reference_is_the_model_with_its_adapter_off(qwen):
    from peft import get_peft_model

    from rlx.llm.stages.grpo import GRPOConfig

    base, tokenizer = llm.load_model(qwen)
    ids = torch.tensor([tokenizer("The capital of France is")["input_ids"]])
    start = base(input_ids=ids).logits.detach()
    model = get_peft_model(base, lora.peft_config(GRPOConfig(lora=True, lora_r=2)))
    for name, param in model.named_parameters():
        if "lora_B" in name:  # an adapter that has learned something
            torch.nn.init.normal_(param)
    reference = lora.reference_of(model)
    assert isinstance(reference, lora.AdapterDisabled)  # no copy of the weights
    torch.testing.assert_close(reference(input_ids=ids).logits, start)
    assert not torch.allclose(model(input_ids=ids).logits, start)


# --- device, precision, memory -------------------------------------------------------------------


def test_device_and_precision_auto_on_this_machine(monkeypatch):
    from rlx.core.devices import resolve_device
    from rlx.llm.precision import resolve_precision

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert str(resolve_device("auto")) == "cpu"
    assert resolve_precision("auto", "cpu") == "fp32"
    assert resolve_precision("bf16-mixed", "cpu") == "bf16-mixed"


def test_gradient_checkpointing_and_accumulation_leave_the_loss_unchanged(qwen, tmp_path):
    rows = [{"messages": chat(q, a)} for q, a in QA] * 2
    losses = []
    for name, fields in (
        ("plain", {}),
        ("ckpt", {"gradient_checkpointing": True, "grad_accum": 2}),
    ):
        llm.sft(qwen, rows, run_dir=tmp_path / name, learning_rate=1e-3, eval_fraction=0.0,
                steps=2, batch_size=4, progress=False, eval_exact_match=False,
                **fields)  # fmt: skip
        lines = (tmp_path / name / "metrics.jsonl").read_text().splitlines()
        losses.append([json.loads(line)["loss"] for line in lines])
    assert losses[0] == pytest.approx(losses[1], rel=1e-4)


def preferences() -> list[dict]:
    """Conversational preferences: the right answer over "No."."""
    reply = lambda text: [{"role": "assistant", "content": text}]  # noqa: E731
    return [{"prompt": chat(q), "chosen": reply(a), "rejected": reply("No.")} for q, a in QA] * 2


# --- every stage, with LoRA and without ----------------------------------------------------------


def load_folders(run_dir, with_lora: bool) -> None:
    """RUN_DIR/model loads with transformers; with LoRA, RUN_DIR/adapter with peft, and the
    adapter trained: every ``lora_B`` (which starts at 0, so that an untrained adapter changes
    nothing) is non-zero, and the merged model, equal to base + adapter, answers the training
    prompts differently from the base model."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    merged = AutoModelForCausalLM.from_pretrained(run_dir / "model")
    assert (run_dir / "adapter").is_dir() == with_lora
    if with_lora:
        base = AutoModelForCausalLM.from_pretrained(
            json.loads((run_dir / "adapter" / "adapter_config.json").read_text())[
                "base_model_name_or_path"
            ]
        )
        tokenizer = AutoTokenizer.from_pretrained(run_dir / "model")
        prompts = [tokenizer.apply_chat_template(chat(q), add_generation_prompt=True,
                                                 tokenize=False) for q, _ in QA]  # fmt: skip
        ids = tokenizer(prompts, padding=True, return_tensors="pt")
        with torch.no_grad():
            before = base(**ids).logits
            adapter = PeftModel.from_pretrained(base, run_dir / "adapter")
            lora_b = {n: p for n, p in adapter.named_parameters() if "lora_B" in n}
            assert lora_b and all(bool(p.abs().max() > 0) for p in lora_b.values()), run_dir
            adapted = adapter.merge_and_unload()
            after = merged(**ids).logits
            torch.testing.assert_close(adapted(**ids).logits, after)
        real = ids["attention_mask"].bool()
        change = (after - before).abs()[real].max()
        assert change > 1e-4, f"{run_dir}: the adapter changed the logits by {float(change):.2g}"
        summary = json.loads((run_dir / "summary.json").read_text())
        assert 0 < summary["trainable_share"] < 0.5


@pytest.mark.parametrize("with_lora", [False, True])
def test_sft_and_dpo_on_conversational_datasets(qwen, tmp_path, with_lora):
    import datasets

    messages = datasets.Dataset.from_list([{"messages": chat(q, a)} for q, a in QA] * 2)
    lora_fields = {"lora": {"r": 4, "lora_alpha": 8}} if with_lora else {}
    sft = llm.sft(qwen, messages, run_dir=tmp_path / "sft", **SMALL, **lora_fields)
    load_folders(sft.run_dir, with_lora)
    prefs = preferences()
    dpo = llm.dpo(sft.model_dir, prefs, run_dir=tmp_path / "dpo", **SMALL, **lora_fields)
    load_folders(dpo.run_dir, with_lora)
    # the run loads as an agent that answers as the saved (merged) model does
    from transformers import AutoModelForCausalLM

    from rlx.llm.generation import greedy

    agent = __import__("rlx").load(dpo.run_dir)
    merged = AutoModelForCausalLM.from_pretrained(dpo.model_dir)
    expected = greedy(merged, agent.tokenizer, ["What is 2+2?"],
                      max_new_tokens=agent.max_new_tokens)  # fmt: skip
    assert agent.act("What is 2+2?") == expected[0]


def reply_length(prompts, completions, **kwargs):
    """A reward with spread among a random model's samples (the others give each 0), so the
    update has a gradient and the adapter must move."""
    return [len(c[0]["content"]) / 10 for c in completions]


@pytest.mark.parametrize("with_lora", [False, True])
def test_grpo_and_rlhf_with_a_trl_reward_reading_a_column(qwen, tmp_path, with_lora, monkeypatch):
    prompts = [{"prompt": chat(q), "answer": a, "weight": 2.0} for q, a in QA] * 2
    calls = []

    def weighted_match(prompts, completions, answer, weight, **kwargs):
        calls.append(len(completions))
        assert completions[0][0]["role"] == "assistant"  # TRL's conversational form
        return [w * (c[0]["content"] == a) for c, a, w in zip(completions, answer, weight,
                                                                 strict=True)]  # fmt: skip

    lora_fields = {"lora": True, "lora_r": 4} if with_lora else {}
    common = {**SMALL, "max_new_tokens": 4, "eval_exact_match": False, **lora_fields}
    result = llm.grpo(qwen, prompts, reward=[weighted_match, "format", reply_length],
                      group_size=2, reward_weights=[1.0, 0.5, 1.0], run_dir=tmp_path / "grpo",
                      **common)  # fmt: skip
    assert calls == [4, 4]
    rows = [json.loads(x) for x in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert "reward/weighted_match" in rows[0] and "reward/format" in rows[0]
    load_folders(result.run_dir, with_lora)
    monkeypatch.setitem(rewards.REWARDS, "reply-length", reply_length)
    rlhf = llm.rlhf(qwen, prompts, reward_model="exact-match,reply-length",
                    run_dir=tmp_path / "ppo", minibatch_size=2, **common)  # fmt: skip
    load_folders(rlhf.run_dir, with_lora)


def test_a_stage_starts_from_an_adapter_folder(qwen, tmp_path):
    rows = [{"messages": chat(q, a)} for q, a in QA] * 2
    first = llm.sft(qwen, rows, run_dir=tmp_path / "a", lora=True, lora_r=2, **SMALL)
    second = llm.sft(first.run_dir / "adapter", rows, run_dir=tmp_path / "b", **SMALL)
    load_folders(second.run_dir, with_lora=True)  # the adapter kept training
    # an RL stage from that folder: pi_ref is the start model, the adapter merged in, not the
    # base model that disabling the adapter would give
    model, _ = lora.load_adapter(first.run_dir / "adapter", "cpu", None)
    reference = lora.reference_of(model, first.run_dir / "adapter")
    assert not isinstance(reference, lora.AdapterDisabled)
    ids = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(reference(input_ids=ids).logits, model(input_ids=ids).logits)
    summary = json.loads((second.run_dir / "summary.json").read_text())
    assert (
        summary["trainable_parameters"]
        == json.loads((first.run_dir / "summary.json").read_text())["trainable_parameters"]
    )


def test_reward_model_with_lora_scores_from_its_merged_folder(qwen, tmp_path):
    import rlx

    prefs = preferences()
    result = llm.reward_model(qwen, prefs, run_dir=tmp_path / "rm", lora=True, lora_r=2, **SMALL)
    assert (result.run_dir / "adapter" / "adapter_config.json").is_file()
    scorer = llm.load_reward_model(result.model_dir)
    loaded = rlx.load(result.run_dir)
    pair = (chat("What is 2+2?"), [{"role": "assistant", "content": "4"}])
    assert loaded.act(pair) == pytest.approx(scorer.act(pair), abs=1e-4)


def test_the_cli_takes_lora_flags_and_a_datasets_split(qwen, tmp_path):
    import datasets

    from rlx.cli import main

    folder = tmp_path / "chat"
    rows = [{"messages": chat(q, a)} for q, a in QA] * 2
    datasets.DatasetDict({"dev": datasets.Dataset.from_list(rows)}).save_to_disk(folder)
    run = tmp_path / "sft"
    code = main(["align", "sft", "--model", str(qwen), "--data", str(folder), "--split", "dev",
                 "--lora", "--lora-r", "2", "--lora-alpha", "4", "--lora-target-modules",
                 "q_proj", "v_proj", "--steps", "2", "--batch-size", "2", "--run-dir", str(run),
                 "--no-progress"])  # fmt: skip
    assert code == 0
    adapter = json.loads((run / "adapter" / "adapter_config.json").read_text())
    assert adapter["r"] == 2 and sorted(adapter["target_modules"]) == ["q_proj", "v_proj"]
    load_folders(run, with_lora=True)
