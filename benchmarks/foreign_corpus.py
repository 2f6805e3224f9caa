"""The doctor corpus's runs that no rlx code trains or logs: other libraries' logs, written the
way those libraries write them, for ``rlx doctor`` to read (:mod:`rlx.diagnostics.foreign`).

- **Stable-Baselines3** PPO on CartPole with rl-baselines3-zoo's hyperparameters, healthy and
  with a learning rate 50x too high; logged by SB3's CSV logger (``progress.csv``).
- **Stable-Baselines3** DQN on CartPole with the zoo's hyperparameters, healthy and with a
  learning rate of 1e-7; logged by SB3's TensorBoard logger only (event files, SB3's tags).
- **CleanRL-style** PPO: a short loop shaped like CleanRL's ``ppo.py`` on CartPole, logging
  CleanRL's TensorBoard tags (``charts/episodic_return``, ``losses/approx_kl`` ...) through
  ``torch.utils.tensorboard``, healthy and with a learning rate of 0.1 over 10 epochs.
- **TRL** GRPO on the corpus's tiny arithmetic model (``trainer_state.json``), healthy (the SFT
  model, eight samples per group) and with two samples per group from the untrained model.

The cases themselves (names, settings, expected findings) are data in
``benchmarks/doctor_corpus.py`` (``FOREIGN_CASES``), which trains them with :func:`train`.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np


def train(algo: str, seed: int, run_dir: Path, settings: dict[str, Any], llm_root: Path) -> Path:
    """Train one foreign run of ``algo`` (``sb3-ppo``, ``sb3-dqn``, ``cleanrl-ppo``,
    ``trl-grpo``) into ``run_dir``, which is emptied first."""
    import shutil

    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    if algo == "trl-grpo":
        return trl_grpo(seed, run_dir, llm_root=llm_root, **settings)
    trainers = {"sb3-ppo": sb3_ppo, "sb3-dqn": sb3_dqn, "cleanrl-ppo": cleanrl_ppo}
    return trainers[algo](seed, run_dir, **settings)


# ---------------------------------------------------------------------------- Stable-Baselines3
def linear(start: float) -> Any:
    """SB3's linear schedule, as the zoo's ``lin_1e-3`` is: ``start`` down to 0."""
    return lambda progress_remaining: progress_remaining * start


def sb3_ppo(seed: int, run_dir: Path, *, total_steps: int = 60_000, learning_rate: float = 1e-3,
            n_epochs: int = 20, linear_schedules: bool = True) -> Path:  # fmt: skip
    """rl-baselines3-zoo's PPO on CartPole-v1 (8 envs x 32 steps, batch 256, 20 epochs,
    gamma 0.98, lambda 0.8, no entropy bonus, learning rate and clip 1e-3 and 0.2 linear to 0),
    over ``total_steps``; ``progress.csv`` by SB3's CSV logger."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.logger import configure

    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98,
                n_epochs=n_epochs, ent_coef=0.0,
                learning_rate=linear(learning_rate) if linear_schedules else learning_rate,
                clip_range=linear(0.2) if linear_schedules else 0.2,
                seed=seed, device="cpu", verbose=0)  # fmt: skip
    model.set_logger(configure(str(run_dir), ["csv"]))
    model.learn(total_steps)
    model.logger.close()
    return run_dir


def sb3_dqn(seed: int, run_dir: Path, *, total_steps: int = 50_000,
            learning_rate: float = 2.3e-3) -> Path:  # fmt: skip
    """rl-baselines3-zoo's DQN on CartPole-v1 (batch 64, buffer 100k, learning starts 1000,
    target update every 10 steps, 128 gradient steps every 256 env steps, epsilon to 0.04 over
    16% of the run, a 256x256 net), over ``total_steps``; SB3's TensorBoard logger only."""
    from stable_baselines3 import DQN
    from stable_baselines3.common.logger import configure

    model = DQN("MlpPolicy", "CartPole-v1", learning_rate=learning_rate, batch_size=64,
                buffer_size=100_000, learning_starts=1000, gamma=0.99, target_update_interval=10,
                train_freq=256, gradient_steps=128, exploration_fraction=0.16,
                exploration_final_eps=0.04, policy_kwargs={"net_arch": [256, 256]}, seed=seed,
                device="cpu", verbose=0)  # fmt: skip
    model.set_logger(configure(str(run_dir), ["tensorboard"]))
    model.learn(total_steps, log_interval=4)
    model.logger.close()
    return run_dir


# ---------------------------------------------------------------------------- CleanRL-style PPO
def cleanrl_ppo(seed: int, run_dir: Path, *, total_steps: int = 50_000,
                learning_rate: float = 2.5e-3, num_envs: int = 4, num_steps: int = 128,
                update_epochs: int = 4, num_minibatches: int = 4, gamma: float = 0.99,
                gae_lambda: float = 0.95, clip_coef: float = 0.2, ent_coef: float = 0.01,
                vf_coef: float = 0.5, max_grad_norm: float = 0.5) -> Path:  # fmt: skip
    """PPO on CartPole-v1 shaped like CleanRL's ``ppo.py`` (its defaults but for the budget and
    a learning rate of 2.5e-3, annealed), logging CleanRL's TensorBoard tags with
    ``torch.utils.tensorboard.SummaryWriter``."""
    import torch
    from torch import nn
    from torch.distributions import Categorical
    from torch.utils.tensorboard import SummaryWriter

    torch.manual_seed(seed)
    writer = SummaryWriter(str(run_dir))
    same_step = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
    envs = gym.make_vec("CartPole-v1", num_envs, vectorization_mode="sync", vector_kwargs=same_step)
    n_obs, n_actions = envs.single_observation_space.shape[0], envs.single_action_space.n

    def layer(i: int, o: int, std: float = math.sqrt(2)) -> nn.Linear:
        linear_layer = nn.Linear(i, o)
        nn.init.orthogonal_(linear_layer.weight, std)
        nn.init.constant_(linear_layer.bias, 0.0)
        return linear_layer

    critic = nn.Sequential(layer(n_obs, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, 1, 1.0))
    actor = nn.Sequential(layer(n_obs, 64), nn.Tanh(), layer(64, 64), nn.Tanh(),
                          layer(64, n_actions, 0.01))  # fmt: skip
    params = [*critic.parameters(), *actor.parameters()]
    optimizer = torch.optim.Adam(params, lr=learning_rate, eps=1e-5)

    batch_size = num_envs * num_steps
    minibatch_size = batch_size // num_minibatches
    iterations = total_steps // batch_size
    obs_buf = torch.zeros((num_steps, num_envs, n_obs))
    actions = torch.zeros((num_steps, num_envs), dtype=torch.long)
    logprobs, rewards, dones, values = (torch.zeros((num_steps, num_envs)) for _ in range(4))
    global_step, start = 0, time.time()
    obs, _ = envs.reset(seed=seed)
    next_obs, next_done = torch.tensor(obs, dtype=torch.float32), torch.zeros(num_envs)
    episode_return, episode_length = np.zeros(num_envs), np.zeros(num_envs, dtype=int)
    for iteration in range(1, iterations + 1):
        lr_now = (1.0 - (iteration - 1.0) / iterations) * learning_rate
        optimizer.param_groups[0]["lr"] = lr_now
        for step in range(num_steps):
            global_step += num_envs
            obs_buf[step], dones[step] = next_obs, next_done
            with torch.no_grad():
                dist = Categorical(logits=actor(next_obs))
                action = dist.sample()
                logprobs[step], values[step] = dist.log_prob(action), critic(next_obs).flatten()
            actions[step] = action
            obs, reward, terminated, truncated, _ = envs.step(action.numpy())
            done = terminated | truncated
            rewards[step] = torch.tensor(reward, dtype=torch.float32)
            next_obs = torch.tensor(obs, dtype=torch.float32)
            next_done = torch.tensor(done, dtype=torch.float32)
            episode_return += reward
            episode_length += 1
            for i in np.flatnonzero(done):
                writer.add_scalar("charts/episodic_return", episode_return[i], global_step)
                writer.add_scalar("charts/episodic_length", episode_length[i], global_step)
                episode_return[i], episode_length[i] = 0.0, 0

        with torch.no_grad():  # GAE, CleanRL's way (a truncation counts as the end)
            next_value = critic(next_obs).flatten()
            advantages = torch.zeros_like(rewards)
            last = torch.zeros(num_envs)
            for t in reversed(range(num_steps)):
                nonterminal = 1.0 - (next_done if t == num_steps - 1 else dones[t + 1])
                following = next_value if t == num_steps - 1 else values[t + 1]
                delta = rewards[t] + gamma * following * nonterminal - values[t]
                last = delta + gamma * gae_lambda * nonterminal * last
                advantages[t] = last
            returns = advantages + values

        b_obs, b_actions = obs_buf.reshape(-1, n_obs), actions.reshape(-1)
        b_logprobs, b_advantages = logprobs.reshape(-1), advantages.reshape(-1)
        b_returns, b_values = returns.reshape(-1), values.reshape(-1)
        clipfracs = []
        for _ in range(update_epochs):
            for idx in torch.randperm(batch_size).split(minibatch_size):
                dist = Categorical(logits=actor(b_obs[idx]))
                logratio = dist.log_prob(b_actions[idx]) - b_logprobs[idx]
                ratio = logratio.exp()
                with torch.no_grad():
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs.append(((ratio - 1.0).abs() > clip_coef).float().mean())
                adv = b_advantages[idx]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                clipped = ratio.clamp(1 - clip_coef, 1 + clip_coef)
                pg_loss = torch.max(-adv * ratio, -adv * clipped).mean()
                v_loss = 0.5 * ((critic(b_obs[idx]).flatten() - b_returns[idx]) ** 2).mean()
                entropy = dist.entropy().mean()
                loss = pg_loss - ent_coef * entropy + vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(params, max_grad_norm)
                optimizer.step()

        y_pred, y_true = b_values.numpy(), b_returns.numpy()
        var_y = np.var(y_true)
        explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
        writer.add_scalar("charts/learning_rate", lr_now, global_step)
        writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
        writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
        writer.add_scalar("losses/entropy", entropy.item(), global_step)
        writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
        writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
        writer.add_scalar("losses/clipfrac", float(np.mean(clipfracs)), global_step)
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        writer.add_scalar("charts/SPS", int(global_step / (time.time() - start)), global_step)
    envs.close()
    writer.close()
    return run_dir


# ---------------------------------------------------------------------------- TRL
def trl_grpo(seed: int, run_dir: Path, *, llm_root: Path, model: str = "sft", steps: int = 20,
             batch_size: int = 16, group_size: int = 8, max_new_tokens: int = 4,
             learning_rate: float = 1e-4) -> Path:  # fmt: skip
    """TRL's ``GRPOTrainer`` on the corpus's arithmetic prompts (sums up to 20) with an
    exact-match reward, from the corpus's tiny ``model`` (``base`` or ``sft``, built by
    ``corpus_models.language_files``); its ``trainer_state.json`` written at the end."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from corpus_models import language_files

    files = language_files(llm_root)
    rows = [json.loads(line) for line in files["prompts.jsonl"].read_text().splitlines()]
    dataset = Dataset.from_list([{"prompt": r["prompt"], "answer": r["answer"]} for r in rows])

    def exact_match(prompts: list[str], completions: list[str], answer: list[str],
                    **_: Any) -> list[float]:  # fmt: skip
        return [float(c.strip() == a.strip()) for c, a in zip(completions, answer, strict=True)]

    args = GRPOConfig(output_dir=str(run_dir), max_steps=steps, learning_rate=learning_rate,
                      per_device_train_batch_size=batch_size, num_generations=group_size,
                      max_completion_length=max_new_tokens, logging_steps=1, save_strategy="no",
                      report_to=[], use_cpu=True, seed=seed, bf16=False, fp16=False,
                      disable_tqdm=True)  # fmt: skip
    trainer = GRPOTrainer(model=str(files[model]), reward_funcs=[exact_match], args=args,
                          train_dataset=dataset)  # fmt: skip
    trainer.train()
    trainer.state.save_to_json(str(run_dir / "trainer_state.json"))
    return run_dir
