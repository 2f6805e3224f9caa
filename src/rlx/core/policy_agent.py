"""The trained actor-critic as an agent: :func:`build_policy` makes the network a config
describes, :func:`agent_state` is what a checkpoint keeps of it, and :class:`PolicyAgent` is
what ``rlx.train`` returns for REINFORCE, A2C and PPO and ``rlx.load(run_dir)`` restores.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlx.core.normalize import ObsNormalizer
from rlx.core.observations import ObservationLayout
from rlx.core.policies import ActorCritic
from rlx.core.rollouts import Collector
from rlx.errors import CheckpointError


def agent_state(policy: ActorCritic, collector: Collector) -> dict[str, Any]:
    """What :class:`PolicyAgent` needs: the network, its architecture, the obs statistics."""
    return {
        "policy": policy.state_dict(),
        "architecture": policy.architecture,
        "normalizer": None if collector.normalizer is None else collector.normalizer.state_dict(),
    }


def build_policy(
    config: Any, collector: Collector, *, critic: bool = True, device: torch.device | None = None
) -> ActorCritic:
    """The actor-critic a config describes, for the collector's spaces, on ``device``."""
    policy = ActorCritic(
        collector.obs_dim,
        collector.actions,
        config.hidden_sizes,
        activation=config.activation,
        critic=critic,
        log_std_init=config.log_std_init,
        observation=collector.layout.spec,
        ortho_init=getattr(config, "ortho_init", True),
    )
    return policy if device is None else policy.to(device)


class PolicyAgent:
    """A trained policy: ``act(obs)`` for one observation, ``act_batch(obs)`` for many.

    ``deterministic=True`` (the default) takes the most likely action (the Gaussian mean);
    ``False`` samples from ``pi(.|s)``. Observations are flattened as in training (a
    ``Dict`` key by key) and normalised with the training statistics; Gaussian actions are
    clipped into the action box. ``action_mask`` (True: valid; ``[B, n]`` for a batch) rules
    out invalid actions. The agent acts on the CPU, whatever device trained it.
    """

    def __init__(self, algo: str, config: Any, env_id: str, state: dict[str, Any]) -> None:
        self.algo, self.config, self.env_id = algo, config, env_id
        try:
            self.policy = ActorCritic(**state["architecture"])
            self.policy.load_state_dict(state["policy"])
        except (KeyError, TypeError, RuntimeError) as exc:
            raise CheckpointError(
                f"this {algo} checkpoint does not hold a policy rlx can rebuild "
                f"({type(exc).__name__}: {exc}); it may come from another rlx version."
            ) from exc
        self.policy.eval()
        self.layout = ObservationLayout.of_spec(
            state["architecture"].get("observation"), self.policy.architecture["obs_dim"]
        )
        self.normalizer = None
        if state["normalizer"] is not None:
            self.normalizer = ObsNormalizer((self.policy.architecture["obs_dim"],))
            self.normalizer.load_state_dict(state["normalizer"])
        self.rng = np.random.default_rng(getattr(config, "seed", 0))
        self.run_dir = None

    def act_batch(
        self, obs: Any, deterministic: bool = True, action_mask: np.ndarray | None = None
    ) -> np.ndarray:
        """Actions for a batch of observations ``[B, ...]`` (a dict of such arrays for a
        ``Dict`` space)."""
        flat = self.layout.flatten(obs)
        x = self.normalizer(flat) if self.normalizer is not None else flat.astype(np.float32)
        mask = None if action_mask is None else np.asarray(action_mask, dtype=bool)
        if deterministic:
            actions = self.policy.mode(x, mask)
        else:
            actions = self.policy.sample(x, self.rng, mask)
        return self.policy.env_action(actions)

    def act(
        self, obs: Any, deterministic: bool = True, action_mask: np.ndarray | None = None
    ) -> Any:
        """The action for one observation: an ``int`` (Discrete) or an array (the others)."""
        mask = None if action_mask is None else np.asarray(action_mask, dtype=bool)[None]
        action = self.act_batch(self.layout.batch_of_one(obs), deterministic, mask)[0]
        return int(action) if self.policy.discrete else action

    def __repr__(self) -> str:
        kind = {"categorical": "softmax", "factored": "factored softmax"}.get(
            self.policy.kind, self.policy.kind
        )
        return f"PolicyAgent({self.algo}, env={self.env_id}, {kind} policy)"


__all__ = ["PolicyAgent", "agent_state", "build_policy"]
