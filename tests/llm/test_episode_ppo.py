"""PPO with a value head over multi-turn episodes (``ppo-episodes``): the advantages of a
hand-built episode equal values worked out by hand (GAE over the model's tokens, the env's
skipped, turn rewards on the replies' last tokens, the KL penalty per model token); the env's
tokens get no reward, no KL, no value target and no loss; a run logs, evaluates, resumes
exactly and trains from the command line; bad settings are one sentence; and (slow) a tiny
model learns hidden-number search on held-out seeds past what any policy deaf to the replies
can reach."""

from __future__ import annotations

import json
import random

import pytest

pytest.importorskip("transformers")

import torch

import rlx
from rlx import cli, llm
from rlx import metrics as M
from rlx.errors import ConfigError
from rlx.llm import episodes as E
from rlx.llm.episode_grpo import EpisodeGRPOConfig, episode_batch, evaluate_episodes, imitate
from rlx.llm.episode_ppo import (
    EpisodePPOConfig,
    collect_episodes,
    episode_advantages,
    episode_token_rewards,
)
from rlx.llm.models import frozen_copy
from rlx.llm.stages.rlhf import PolicyWithValueHead, ppo_update
from rlx.llm.text_env import BlindEnv, HiddenNumberEnv

TEXTS = ["0123456789 find-: higher lower correct a number next"]
FAST = {"batch_size": 4, "minibatch_size": 2, "num_epochs": 2, "max_new_tokens": 3,
        "eval_episodes": 3, "device": "cpu", "progress": False}  # fmt: skip
TIMINGS = {M.GENERATION_S, M.UPDATE_S, "wall_s", "time_s", "step_s"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.set_num_threads(1)
    return llm.make_tiny_lm(tmp_path_factory.mktemp("tiny") / "lm", texts=TEXTS,
                            hidden_size=16, num_layers=1, num_heads=2, max_length=48)  # fmt: skip


def rows(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]


# ---------------------------------------------------------------- the math, by hand
def hand_built() -> list[E.Episode]:
    """Two episodes as the rollouts lay them out (ids are arbitrary):

    0: [p p] [a b] [e e] [c d]   two turns, rewards 0.5 then 1.0, env tokens between
    1: [p] [x y z]               one turn, reward 2.0 (padded to the first one's width)

    In the per-token columns (column j = token j + 1) episode 0's model tokens sit at
    columns 1, 2 (a, b) and 5, 6 (c, d); episode 1's at 0, 1, 2."""
    two = E.Episode(seed=0, input_ids=[5, 6, 7, 8, 9, 10, 11, 12],
                    loss_mask=[False, False, True, True, False, False, True, True],
                    prompt_length=2, turn_rewards=[0.5, 1.0], turns=2)  # fmt: skip
    one = E.Episode(seed=1, input_ids=[5, 7, 8, 9], loss_mask=[False, True, True, True],
                    prompt_length=1, turn_rewards=[2.0], turns=1)  # fmt: skip
    return [two, one]


ENV = 100.0  # what sits at the env's columns: anything, it must never count
BETA, GAMMA, LAM = 0.5, 0.9, 0.8
# log pi - log pi_ref at each column (model tokens: a 0.2, b -0.4, c 0, d 0.6; x, y, z 0)
LOG_RATIO = [[ENV, 0.2, -0.4, ENV, ENV, 0.0, 0.6], [0.0, 0.0, 0.0, ENV, ENV, ENV, ENV]]
# V(s_t) before each token (a 0.1, b 0.2, c 0.3, d 0.4; x 1.0, y 0.5, z 0.25)
VALUES = [[ENV, 0.1, 0.2, ENV, ENV, 0.3, 0.4], [1.0, 0.5, 0.25, ENV, ENV, ENV, ENV]]


def test_advantages_of_a_hand_built_episode_match_the_hand_worked_values():
    episodes = hand_built()
    mask = episode_batch(episodes, 0, "cpu").target_mask
    assert mask.tolist() == [[False, True, True, False, False, True, True],
                             [True, True, True, False, False, False, False]]  # fmt: skip
    ref_logp = torch.zeros(2, 7, dtype=torch.float64)
    logp = torch.tensor(LOG_RATIO, dtype=torch.float64)
    values = torch.tensor(VALUES, dtype=torch.float64)

    rewards = episode_token_rewards(episodes, logp, ref_logp, mask, BETA)
    # r = -beta * log-ratio, plus the turn's reward on its reply's last token (b, d; z)
    #   a: -0.1   b: 0.2 + 0.5 = 0.7   c: 0   d: -0.3 + 1.0 = 0.7   x: 0  y: 0  z: 2.0
    expected_rewards = [[0, -0.1, 0.7, 0, 0, 0.0, 0.7], [0.0, 0.0, 2.0, 0, 0, 0, 0]]
    torch.testing.assert_close(rewards, torch.tensor(expected_rewards, dtype=torch.float64))
    # length_normalize: each turn's reward over the episode's model tokens (4 and 3)
    normalized = episode_token_rewards(episodes, logp, ref_logp, mask, BETA, True)
    assert normalized[0, 2].item() == pytest.approx(0.2 + 0.5 / 4)
    assert normalized[0, 6].item() == pytest.approx(-0.3 + 1.0 / 4)
    assert normalized[1, 2].item() == pytest.approx(2.0 / 3)

    advantages, returns = episode_advantages(rewards, values, mask, GAMMA, LAM)
    # episode 0, the model's tokens in order a b | c d (gamma lambda = 0.72):
    #   delta_d = 0.7 - 0.4 = 0.3               A_d = 0.3
    #   delta_c = 0 + 0.9 * 0.4 - 0.3 = 0.06     A_c = 0.06 + 0.72 * 0.3 = 0.276
    #   delta_b = 0.7 + 0.9 * 0.3 - 0.2 = 0.77   A_b = 0.77 + 0.72 * 0.276 = 0.96872
    #     (b bootstraps on V at c, the next reply's first token, across the env's answer)
    #   delta_a = -0.1 + 0.9 * 0.2 - 0.1 = -0.02 A_a = -0.02 + 0.72 * 0.96872 = 0.6774784
    # episode 1: x y z
    #   delta_z = 2 - 0.25 = 1.75                A_z = 1.75
    #   delta_y = 0.9 * 0.25 - 0.5 = -0.275      A_y = -0.275 + 0.72 * 1.75 = 0.985
    #   delta_x = 0.9 * 0.5 - 1.0 = -0.55        A_x = -0.55 + 0.72 * 0.985 = 0.1592
    expected = [[0, 0.6774784, 0.96872, 0, 0, 0.276, 0.3], [0.1592, 0.985, 1.75, 0, 0, 0, 0]]
    torch.testing.assert_close(advantages, torch.tensor(expected, dtype=torch.float64))
    # R = A + V on the model's tokens, 0 at the env's
    expected_returns = [[0, 0.7774784, 1.16872, 0, 0, 0.576, 0.7], [1.1592, 1.485, 2.0, 0, 0, 0, 0]]
    torch.testing.assert_close(returns, torch.tensor(expected_returns, dtype=torch.float64))


def test_env_tokens_carry_no_reward_kl_or_value_target():
    episodes = hand_built()
    mask = episode_batch(episodes, 0, "cpu").target_mask
    logp = torch.tensor(LOG_RATIO, dtype=torch.float64)
    ref_logp = torch.zeros_like(logp)
    values = torch.tensor(VALUES, dtype=torch.float64)
    noise = torch.randn(logp.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    env = (~mask).double() * noise * 50
    plain = episode_token_rewards(episodes, logp, ref_logp, mask, BETA)
    moved = episode_token_rewards(episodes, logp + env, ref_logp - env, mask, BETA)
    torch.testing.assert_close(plain, moved)
    torch.testing.assert_close(
        episode_advantages(plain, values, mask, GAMMA, LAM),
        episode_advantages(plain, values + env, mask, GAMMA, LAM),
    )


class EnvNoise(torch.nn.Module):
    """The policy with its log-probs, entropies and values moved far at every column that is
    not a model token (the env's tokens, the prompt, padding)."""

    def __init__(self, policy: PolicyWithValueHead) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, batch):
        logp, entropy, values = self.policy(batch)
        off = (~batch.target_mask).to(logp.dtype)
        return logp - 3.0 * off, entropy + 2.0 * off, values + 5.0 * off


def test_the_ppo_loss_ignores_the_env_tokens(tiny):
    model, tokenizer = llm.load_model(tiny)
    policy = PolicyWithValueHead(model)
    torch.nn.init.normal_(policy.value_head.weight, std=0.5)  # values that vary
    config = EpisodePPOConfig(beta=0.2, minibatch_size=3, num_epochs=2, max_new_tokens=3,
                              device="cpu", precision="fp32")  # fmt: skip
    torch.manual_seed(0)
    rollout, episodes = collect_episodes(
        policy, frozen_copy(model), tokenizer, HiddenNumberEnv, [1, 2, 3, 4, 5, 6], config, 0.2
    )
    assert any(not all(e.loss_mask[e.prompt_length :]) for e in episodes)  # env tokens inside
    rollout.advantages = rollout.advantages + torch.linspace(-1, 1, 6)[:, None] * rollout.mask
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.0)  # the same weights each time
    results = []
    for net in (policy, EnvNoise(policy)):
        torch.manual_seed(1)  # the same minibatches
        results.append(ppo_update(net, optimizer, rollout, config.update_config()))
    plain, noisy = results
    for name in (M.POLICY_LOSS, M.VALUE_LOSS, M.CLIP_FRACTION, M.APPROX_KL, M.ENTROPY,
                 M.GRAD_NORM):  # fmt: skip
        assert noisy[name] == pytest.approx(plain[name], rel=1e-5, abs=1e-7), name
    assert plain[M.VALUE_LOSS] > 0 and plain[M.GRAD_NORM] > 0


# ---------------------------------------------------------------- runs
def test_a_run_logs_evaluates_and_saves(tiny, tmp_path):
    run = tmp_path / "run"
    result = rlx.train("ppo-episodes", "hidden-number", model=str(tiny), steps=2, run_dir=run,
                       beta=0.1, **FAST)  # fmt: skip
    assert result.status == "completed" and (run / "model" / "config.json").exists()
    logged = rows(run)
    assert [r["step"] for r in logged] == [1, 2]
    for name in (M.REWARD, M.KL_REF, M.BETA, M.EXPLAINED_VARIANCE, M.POLICY_LOSS, M.VALUE_LOSS,
                 M.CLIP_FRACTION, M.APPROX_KL, M.ENTROPY, M.EPISODE_TURNS, M.SUCCESS_RATE,
                 M.INVALID_ACTION_RATE, M.RESPONSE_LENGTH, M.LR):  # fmt: skip
        assert all(name in r for r in logged), name
    summary = json.loads((run / "summary.json").read_text())
    assert summary["algo"] == "ppo-episodes" and summary["steps"] == 2
    low, rate, high = (summary[k] for k in (M.EVAL_SUCCESS_LOW, M.EVAL_SUCCESS_RATE,
                                            M.EVAL_SUCCESS_HIGH))  # fmt: skip
    assert 0 <= low <= rate + 1e-9 and rate <= high <= 1 and summary[M.EVAL_EPISODES] == 3
    assert rlx.load(run).tokenizer is not None  # its checkpoint loads as a model


def test_a_stopped_run_resumes_where_it_stopped_exactly(tiny, tmp_path):
    class StopAt2:
        def on_update(self, step, metrics):
            return step < 2

    whole, part = tmp_path / "whole", tmp_path / "part"
    settings = {"model": str(tiny), "steps": 4, "beta": 0.1, "adaptive_kl": True,
                "kl_target": 0.01, "kl_horizon": 4, **FAST}  # fmt: skip
    rlx.train("ppo-episodes", "hidden-number", run_dir=whole, **settings)
    rlx.train("ppo-episodes", "hidden-number", run_dir=part, callbacks=[StopAt2()], **settings)
    assert json.loads((part / "summary.json").read_text())["status"] == "stopped"
    # llm.rlhf without env or data continues the episode run its folder records
    result = llm.rlhf("", run_dir=part, resume=True, progress=False)
    assert result.status == "completed" and (part / "model").exists()
    resumed, straight = rows(part), rows(whole)
    assert [r["step"] for r in resumed] == [1, 2, 3, 4]  # no row twice
    assert len({r[M.BETA] for r in straight}) > 1  # the controller moved beta: it resumes too
    for a, b in zip(resumed, straight, strict=True):
        same = {k for k in a if k not in TIMINGS and isinstance(a[k], float)}
        assert same and all(a[k] == pytest.approx(b[k], abs=1e-5) for k in same), a["step"]


def test_llm_rlhf_with_an_env_trains_ppo_over_episodes(tiny, tmp_path):
    result = llm.rlhf(tiny, env="hidden-number", env_kwargs={"hi": 3}, steps=1,
                      run_dir=tmp_path / "r", **FAST)  # fmt: skip
    assert result.status == "completed" and M.EVAL_SUCCESS_RATE in result.metrics
    written = json.loads((tmp_path / "r" / "config.json").read_text())
    assert written["algo"] == "ppo-episodes" and written["env_recipe"]["kwargs"] == {"hi": 3}
    with pytest.raises(ConfigError, match="pass one of them"):
        llm.rlhf(tiny, "prompts.jsonl", env="hidden-number", run_dir=tmp_path / "x", steps=1)
    with pytest.raises(ConfigError, match="pass one of them"):
        llm.rlhf(tiny, env="hidden-number", reward_model="exact-match", run_dir=tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_the_cli_trains_ppo_over_episodes(tiny, tmp_path):
    run = tmp_path / "cli"
    assert cli.main(["train", "ppo-episodes", "--model", str(tiny), "--env", "hidden-number",
                     "--run-dir", str(run), "--steps", "1", "--batch-size", "2",
                     "--minibatch-size", "2", "--max-new-tokens", "3", "--eval-episodes", "2",
                     "--device", "cpu", "--no-progress"]) == 0  # fmt: skip
    written = json.loads((run / "config.json").read_text())
    assert written["algo"] == "ppo-episodes" and written["env"] == "hidden-number"


def test_bad_settings_are_one_sentence_errors(tiny, tmp_path):
    for field, value, says in (
        ("gae_lambda", 1.5, "gae_lambda=1.5 must be in [0.0, 1.0]"),
        ("gamma", -0.1, "gamma=-0.1 must be in [0.0, 1.0]"),
        ("clip_eps", 0.0, "clip_eps=0.0 must be > 0"),
        ("clip_value", -1.0, "clip_value=-1.0 must be > 0"),
        ("minibatch_size", 0, "minibatch_size=0 must be >= 1"),
        ("num_epochs", 0, "num_epochs=0 must be >= 1"),
        ("beta", -0.1, "beta=-0.1 must be >= 0"),
        ("train_seed_start", 10, "train_seed_start=10 must be >= 32"),
    ):
        with pytest.raises(ConfigError) as err:
            EpisodePPOConfig(**{field: value})
        message = str(err.value)
        assert says in message and message.count(". ") == 0 and "\n" not in message, message
    with pytest.raises(ConfigError, match="needs steps"):
        rlx.train("ppo-episodes", "hidden-number", model=str(tiny), run_dir=tmp_path / "r",
                  **FAST)  # fmt: skip
    with pytest.raises(ConfigError, match="unknown text env 'hidden-numbr'"):
        rlx.train("ppo-episodes", "hidden-numbr", model=str(tiny), steps=1,
                  run_dir=tmp_path / "r", **FAST)  # fmt: skip
    assert not (tmp_path / "r").exists()


# ---------------------------------------------------------------- learning (slow)
TINY = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "max_length": 64}


def blind_bound(seeds: range, turns: int = 3) -> float:
    """The best success any policy deaf to the replies reaches on ``seeds``: it says a fixed
    sequence of ``turns`` guesses, so at most the share of the seeds whose number is among the
    ``turns`` most common."""
    from collections import Counter

    def target(seed: int) -> int:
        env = HiddenNumberEnv()
        env.reset(seed)
        return env.target

    counts = Counter(target(s) for s in seeds)
    return sum(n for _, n in counts.most_common(turns)) / len(seeds)


def learned(tmp_path, make_env) -> tuple[float, float]:
    """Held-out success before and after: a tiny model warmed up on random well-formed
    guesses (blind to the replies), then 250 PPO steps of 64 episodes of ``make_env``."""
    torch.set_num_threads(1)
    start = llm.make_tiny_lm(tmp_path / "lm", texts=TEXTS, **TINY)
    model, tokenizer = llm.load_model(start)
    rng = random.Random(0)
    demos = E.scripted_episodes(tokenizer, make_env, range(5000, 5512),
                                lambda seen: str(rng.randint(1, 7)))  # fmt: skip
    imitate(model, tokenizer, demos, steps=150, learning_rate=3e-3, batch_size=32)
    held_out = EpisodeGRPOConfig(eval_episodes=49, max_new_tokens=3, device="cpu")
    before = evaluate_episodes(model, tokenizer, make_env, held_out)[E.EVAL_SUCCESS_RATE]
    from rlx.llm.lora import save_trained

    save_trained(model, tokenizer, tmp_path, "warm")
    result = rlx.train("ppo-episodes", make_env, model=str(tmp_path / "warm"), steps=250,
                       run_dir=tmp_path / "run", batch_size=64, minibatch_size=16,
                       num_epochs=4, max_new_tokens=3, learning_rate=1e-3, vf_coef=0.5,
                       beta=0.0, eval_episodes=49, device="cpu", progress=False)  # fmt: skip
    return before, result.metrics[E.EVAL_SUCCESS_RATE]


@pytest.mark.slow
def test_multi_turn_ppo_learns_search_that_a_blind_policy_cannot(tmp_path):
    bound = blind_bound(range(49))  # what any policy deaf to the replies reaches at best
    before, after = learned(tmp_path / "multi", HiddenNumberEnv)
    _, blind = learned(tmp_path / "blind", lambda: BlindEnv(HiddenNumberEnv()))
    assert blind <= bound + 1e-9  # the same training with the replies hidden stays under it
    assert after >= bound + 0.15 and after >= before + 0.3, (before, after, bound)
