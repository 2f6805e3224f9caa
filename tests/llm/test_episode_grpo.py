"""Multi-turn episodes and GRPO over them: the kept key/value cache reads what a full forward
pass reads, the environment's tokens are masked from the loss and the KL (zero gradient), the
loop runs and logs its metrics, and (slow) a tiny model learns hidden-number search on held-out
seeds, which the same model with the replies hidden cannot."""

from __future__ import annotations

import itertools
import json
import random
from collections import Counter

import pytest

pytest.importorskip("transformers")

import torch

from rlx import llm
from rlx import metrics as M
from rlx.errors import ConfigError
from rlx.llm import episodes as E
from rlx.llm.episode_grpo import (
    EpisodeGRPOConfig,
    episode_batch,
    episode_loss,
    episode_step,
    evaluate_episodes,
    imitate,
)
from rlx.llm.logprobs import token_logprobs_and_entropy
from rlx.llm.models import frozen_copy
from rlx.llm.text_env import BlindEnv, HiddenNumberEnv

TEXTS = ["0123456789 find-: higher lower correct a number next"]
TINY = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "max_length": 64}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.set_num_threads(1)
    path = llm.make_tiny_lm(tmp_path_factory.mktemp("tiny") / "lm", texts=TEXTS, **TINY)
    return path, *llm.load_model(path)


def random_guesser(seed: int = 0):
    rng = random.Random(seed)
    return lambda observations: str(rng.randint(1, 7))


def test_the_kept_cache_reads_what_a_full_forward_pass_reads(tiny):
    _, model, tokenizer = tiny
    torch.manual_seed(0)
    episodes = E.rollout_groups(model, tokenizer, HiddenNumberEnv, [0, 1, 2], 4,
                                max_new_tokens=4)  # fmt: skip
    assert [e.seed for e in episodes] == [0] * 4 + [1] * 4 + [2] * 4  # seed-major groups
    assert len({len(e.input_ids) for e in episodes}) > 1  # ragged: holes in the cache
    batch = episode_batch(episodes, tokenizer.pad_token_id, "cpu")
    with torch.no_grad():
        logp, _ = token_logprobs_and_entropy(model, batch)
    for row, episode in enumerate(episodes):
        full = logp[row][batch.target_mask[row]]
        assert len(full) == len(episode.sampled_logprobs) == episode.model_tokens
        torch.testing.assert_close(full, torch.tensor(episode.sampled_logprobs),
                                   atol=1e-4, rtol=0)  # fmt: skip


def test_the_mask_marks_the_models_tokens_and_only_those(tiny):
    _, model, tokenizer = tiny
    eos = tokenizer.eos_token_id
    for episode in E.rollout_groups(model, tokenizer, HiddenNumberEnv, [4], 6, max_new_tokens=3):
        ids, mask = episode.input_ids, episode.loss_mask
        assert not any(mask[: episode.prompt_length])
        runs = itertools.groupby(zip(ids, mask, strict=True), key=lambda p: p[1])
        said = [[t for t, _ in group] for trained, group in runs if trained]
        assert len(said) == episode.turns
        for reply, text in zip(said, episode.replies, strict=True):
            assert tokenizer.decode([t for t in reply if t != eos]) == text
        heard = [tokenizer.decode([t for t, m in group]) for trained, group in
                 itertools.groupby(zip(ids, mask, strict=True), key=lambda p: p[1])
                 if not trained]  # fmt: skip
        assert heard[1:] == episode.observations[1 : len(heard)]  # the env's answers, as sent


def test_environment_tokens_get_zero_gradient(tiny):
    _, model, tokenizer = tiny
    torch.manual_seed(1)
    episodes = E.rollout_groups(model, tokenizer, HiddenNumberEnv, [0, 1], 4, max_new_tokens=3)
    batch = episode_batch(episodes, tokenizer.pad_token_id, "cpu")
    config = EpisodeGRPOConfig(group_size=4, beta=0.5, device="cpu", precision="fp32")
    reference = frozen_copy(model)
    with torch.no_grad():
        ref_logp = token_logprobs_and_entropy(reference, batch)[0] + 0.3  # a KL that pulls
    seen: dict[str, torch.Tensor] = {}

    class Spy(torch.nn.Module):  # keeps the logits' gradient
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, **kwargs):
            out = self.inner(**kwargs)
            out.logits.retain_grad()
            seen["logits"] = out.logits
            return out

    advantages = torch.linspace(-1.0, 1.0, len(episodes))
    loss, metrics = episode_loss(Spy(), batch, advantages, None, ref_logp, config)
    loss.backward()
    grad = seen["logits"].grad[:, :-1].abs().sum(-1)  # row t - 1 predicts token t
    target = batch.target_mask
    assert torch.all(grad[~target] == 0)  # env tokens (and padding): no gradient at all
    assert torch.all(grad[target] > 0)  # every model token: advantage and KL act on it
    assert M.KL_REF in metrics and float(metrics[M.KL_REF]) > 0
    model.zero_grad(set_to_none=True)


def test_one_step_logs_the_episode_metrics(tiny):
    _, model, tokenizer = tiny
    config = EpisodeGRPOConfig(group_size=4, batch_size=2, max_new_tokens=3, beta=0.1,
                               device="cpu", precision="fp32")  # fmt: skip
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    metrics, episodes = episode_step(model, frozen_copy(model), tokenizer, optimizer,
                                     HiddenNumberEnv, [7, 8], config)  # fmt: skip
    assert len(episodes) == 8
    for name in (M.REWARD, M.GROUP_REWARD_STD, M.FRAC_ZERO_STD_GROUPS, M.KL_REF, M.ENTROPY,
                 M.CLIP_FRACTION, E.EPISODE_TURNS, E.EPISODE_TRUNCATED_FRACTION, E.TURN_REWARD,
                 E.INVALID_ACTION_RATE, E.SUCCESS_RATE, M.RESPONSE_LENGTH):  # fmt: skip
        assert name in metrics, name
    assert 1 <= metrics[E.EPISODE_TURNS] <= 3
    assert E.TOOL_ERROR_RATE not in metrics  # no tool calls, no rate


def test_the_token_budget_truncates_an_episode_cleanly(tiny):
    _, model, tokenizer = tiny
    episodes = E.run_episodes(model, tokenizer, [HiddenNumberEnv(max_turns=50)] * 1, [0],
                              max_new_tokens=4, max_episode_tokens=24)  # fmt: skip
    (episode,) = episodes
    assert episode.truncated and len(episode.input_ids) <= 24
    with pytest.raises(ConfigError, match="leaves no room for a reply"):
        E.run_episodes(model, tokenizer, [HiddenNumberEnv()], [0], max_episode_tokens=5)


def test_bad_settings_are_one_sentence_errors():
    with pytest.raises(ConfigError, match="group_size=1 must be >= 2"):
        EpisodeGRPOConfig(group_size=1)
    with pytest.raises(ConfigError, match="train_seed_start=10 must be >= 32"):
        EpisodeGRPOConfig(train_seed_start=10)
    with pytest.raises(ConfigError, match="got 2 envs and 1 seeds"):
        E.run_episodes(None, None, [HiddenNumberEnv(), HiddenNumberEnv()], [0])


def test_chat_observations_are_rendered_by_the_template(tmp_path):
    path = llm.make_tiny_chat_lm(tmp_path / "chat", texts=["find a number higher lower 1234567"])
    model, tokenizer = llm.load_model(path)

    class ChatNumber(HiddenNumberEnv):
        def reset(self, seed):
            return [{"role": "user", "content": super().reset(seed)}]

    (episode,) = E.scripted_episodes(tokenizer, lambda: ChatNumber(max_turns=2), [3],
                                     lambda seen: "1")  # fmt: skip
    text = tokenizer.decode(episode.input_ids)
    assert text.count("<|im_start|>assistant\n1<|im_end|>") == 2
    said = tokenizer.decode([t for t, m in zip(episode.input_ids, episode.loss_mask,
                                                strict=True) if m])  # fmt: skip
    assert said == "1<|im_end|>1<|im_end|>"  # the template's turns are the env's tokens
    played = E.run_episodes(model, tokenizer, [ChatNumber(max_turns=2)], [3], max_new_tokens=4)
    assert played[0].turns >= 1


def test_a_run_over_episodes_logs_and_saves(tiny, tmp_path):
    path, model, tokenizer = tiny
    demos = E.scripted_episodes(tokenizer, HiddenNumberEnv, range(100, 164), random_guesser())
    assert imitate(model, tokenizer, demos, steps=3, batch_size=16) > 0
    result = llm.grpo(path, env=HiddenNumberEnv, steps=3, run_dir=tmp_path / "run",
                      group_size=4, batch_size=2, max_new_tokens=3, eval_episodes=5,
                      device="cpu", progress=False)  # fmt: skip
    assert result.status == "completed" and (result.model_dir / "config.json").exists()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert all(E.EPISODE_TURNS in r and M.KL_REF in r for r in rows)
    assert E.EVAL_SUCCESS_RATE in rows[-1] and result.metrics[E.EVAL_EPISODES] == 5
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["algo"] == "grpo-episodes" and E.EVAL_SUCCESS_RATE in summary


# ---------------------------------------------------------------- learning (slow)
def blind_bound(seeds: range, turns: int = 3) -> float:
    """The best success any policy that cannot see the replies reaches on ``seeds``: it says
    a fixed sequence of ``turns`` guesses, so at most the share of the seeds whose number is
    among the ``turns`` most common."""
    counts = Counter(_target(s) for s in seeds)
    return sum(n for _, n in counts.most_common(turns)) / len(seeds)


def _target(seed: int) -> int:
    env = HiddenNumberEnv()
    env.reset(seed)
    return env.target


def learned(tmp_path, make_env) -> tuple[float, float]:
    """Held-out success before and after: a tiny model, warmed up on random well-formed
    guesses (blind to the replies), then 400 GRPO steps over episodes of ``make_env``."""
    torch.set_num_threads(1)
    start = llm.make_tiny_lm(tmp_path / "lm", texts=TEXTS, **TINY)
    model, tokenizer = llm.load_model(start)
    demos = E.scripted_episodes(tokenizer, make_env, range(5000, 5512), random_guesser())
    imitate(model, tokenizer, demos, steps=150, learning_rate=3e-3, batch_size=32)
    config = EpisodeGRPOConfig(eval_episodes=49, max_new_tokens=3, device="cpu")
    before = evaluate_episodes(model, tokenizer, make_env, config)[E.EVAL_SUCCESS_RATE]
    from rlx.llm.lora import save_trained

    save_trained(model, tokenizer, tmp_path, "warm")
    result = llm.grpo(tmp_path / "warm", env=make_env, steps=400, run_dir=tmp_path / "run",
                      group_size=8, batch_size=16, max_new_tokens=3, learning_rate=2e-3,
                      beta=0.0, eval_episodes=49, device="cpu", progress=False)  # fmt: skip
    return before, result.metrics[E.EVAL_SUCCESS_RATE]


@pytest.mark.slow
def test_multi_turn_grpo_learns_search_that_a_blind_policy_cannot(tmp_path):
    held_out = range(49)
    bound = blind_bound(held_out)  # what any policy deaf to the replies reaches at best
    before, after = learned(tmp_path / "multi", HiddenNumberEnv)
    _, blind = learned(tmp_path / "blind", lambda: BlindEnv(HiddenNumberEnv()))
    assert blind <= bound + 1e-9  # the baseline cannot beat its structural bound
    assert after >= 0.7 and after >= bound + 0.15, (before, after, bound)
    assert after >= blind + 0.3, (after, blind)
