"""What the search asks at the edge of its tree: leaf evaluators, as OpenSpiel's MCTS has them.

The search (:func:`rlx.games.search.search`) walks its tree and, where a walk leaves it, hands
the position and the move to an evaluator, which says what lies beyond: a :class:`Leaf`, with
the value of the position for its player to move and, for a search guided by priors, the
priors of its moves. The evaluator also plants the roots. Three of them:

- :class:`RandomRollouts` (pure MCTS): the rules give the next position, one game of uniformly
  random moves from it gives its value; no priors, so the search selects by UCT.
- :class:`PolicyValueEvaluator` (AlphaZero): the rules give the next position, a policy-value
  network ``(P, v) = f(s)`` its priors and value, for every leaf of a simulation in one batch;
  the search selects by PUCT.
- :class:`LatentModel` (MuZero): a learned model gives the next state and the move's reward,
  ``s', r = g(s, a)``, and its prediction the priors and value, ``(P, v) = f(s')``; the rules
  are used only at the root, for the legal moves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from rlx.games.base import Game, GameState

#: ``policy_value(planes[B, C, H, W], legal[B, A]) -> (priors[B, A], values[B])``: priors are
#: probabilities over the legal moves, values in [-1, 1] for the player to move.
PolicyValue = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass
class Leaf:
    """An evaluated position: what the search adds to its tree.

    Attributes:
        position: a :class:`GameState`, or a learned model's latent state.
        value: its value for the player to move there (the result, if the game is over).
        legal: the moves the tree may try from it; None when the game is over there (the
            position is not added to the tree, and its value is read again at each visit).
        prior: ``P(s, a)`` of its moves; None for a search without priors (UCT).
        to_play: the player to move there (+1 / -1); None in a learned model, whose moves
            alternate.
        reward: ``r(s, a)``, the reward of the move into it for the player who made it (0 for
            board games played by the rules: their only reward is the result).
    """

    position: Any
    value: float
    legal: np.ndarray | None
    prior: np.ndarray | None = None
    to_play: int | None = None
    reward: float = 0.0


@runtime_checkable
class Evaluator(Protocol):
    """How the search learns about positions: its roots, and the positions beyond its tree."""

    def roots(self, game: Game, states: Sequence[GameState], rng: np.random.Generator) -> list:
        """A :class:`Leaf` for each (non-terminal) root position."""
        ...

    def leaves(
        self,
        game: Game,
        positions: Sequence[Any],
        actions: Sequence[int],
        rng: np.random.Generator,
    ) -> list:
        """A :class:`Leaf` for each position reached by playing ``actions[i]`` in
        ``positions[i]`` (a tree node's position), in one batch."""
        ...


def result_value(state: GameState) -> float:
    """The result of a finished game for the player to move there, which the rules name."""
    assert state.result is not None  # only called for finished games
    return float(state.result * state.to_play)


def result_leaf(state: GameState) -> Leaf:
    """A finished game: its result for the player to move there."""
    return Leaf(state, result_value(state), None, to_play=state.to_play)


class RandomRollouts:
    """Random rollouts: ``v(s)`` is the result of one game of uniformly random legal moves from
    ``s`` (``Game.random_playout``) for the player to move at ``s``; no priors (UCT)."""

    def roots(self, game: Game, states: Sequence[GameState], rng: np.random.Generator) -> list:
        return [Leaf(s, 0.0, game.legal_mask(s), to_play=s.to_play) for s in states]

    def leaves(
        self,
        game: Game,
        positions: Sequence[GameState],
        actions: Sequence[int],
        rng: np.random.Generator,
    ) -> list:
        out = []
        for position, action in zip(positions, actions, strict=True):
            state = game.play(position, int(action))
            if state.is_terminal:
                out.append(result_leaf(state))
                continue
            value = self.value(game, state, rng)
            out.append(Leaf(state, value, game.legal_mask(state), to_play=state.to_play))
        return out

    def value(self, game: Game, state: GameState, rng: np.random.Generator) -> float:
        """``v(s)`` of a position where the game goes on: one random game's result for the
        player to move at ``s``."""
        return float(game.random_playout(state, rng) * state.to_play)

    def __repr__(self) -> str:
        return "RandomRollouts()"


class PolicyValueEvaluator:
    """A policy-value network ``(P, v) = f(s)`` over the game's planes (:meth:`Game.encode`),
    called once per simulation step on every open leaf of every tree searched together.

    Calling it is calling ``policy_value``: ``evaluator(planes, legal) -> (priors, values)``.
    """

    def __init__(self, policy_value: PolicyValue) -> None:
        self.policy_value = policy_value

    def __call__(self, planes: np.ndarray, legal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.policy_value(planes, legal)

    def roots(self, game: Game, states: Sequence[GameState], rng: np.random.Generator) -> list:
        return self.evaluate(game, states)

    def leaves(
        self,
        game: Game,
        positions: Sequence[GameState],
        actions: Sequence[int],
        rng: np.random.Generator,
    ) -> list:
        states = [game.play(p, int(a)) for p, a in zip(positions, actions, strict=True)]
        return self.evaluate(game, states)

    def evaluate(self, game: Game, states: Sequence[GameState]) -> list:
        """A :class:`Leaf` of each state: the open ones evaluated in one batch."""
        out: list = [result_leaf(s) if s.is_terminal else None for s in states]
        open_ = [i for i, s in enumerate(states) if not s.is_terminal]
        if open_:
            planes = np.stack([game.encode(states[i]) for i in open_])
            legal = np.stack([game.legal_mask(states[i]) for i in open_])
            priors, values = self.policy_value(planes, legal)
            for j, i in enumerate(open_):
                prior = np.asarray(priors[j], dtype=np.float64)
                out[i] = Leaf(states[i], float(values[j]), legal[j], prior, states[i].to_play)
        return out

    def __repr__(self) -> str:
        return f"PolicyValueEvaluator({self.policy_value!r})"


def softmax(logits: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Softmax over the last axis (over ``mask``'s True entries only, when given)."""
    logits = np.asarray(logits, dtype=np.float64)
    if mask is not None:
        logits = np.where(mask, logits, -np.inf)
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


class LatentModel:
    """A learned model (MuZero's): a root is ``s^0, p^0, v^0 = h(o), f(h(o))`` with the prior
    over the legal moves; beyond the tree, ``s', r = g(s, a)`` and ``p', v' = f(s')``, every
    action allowed (the model has no rules).

    ``net`` is a :class:`rlx.games.muzero.MuZeroNet`, or anything with its
    ``initial_inference`` and ``recurrent_inference`` (torch loads with the first model).
    """

    def __init__(self, net: Any) -> None:
        import torch

        self.net = net
        # the search keeps latent states on the host: one transfer each way per batch
        parameters = net.parameters() if isinstance(net, torch.nn.Module) else iter(())
        self.device = next(parameters, torch.zeros(())).device

    def roots(self, game: Game, states: Sequence[GameState], rng: np.random.Generator) -> list:
        import torch

        planes = torch.from_numpy(game.encode_batch(states)).to(self.device)
        legal = np.stack([game.legal_mask(s) for s in states])
        with torch.inference_mode():
            hidden, logits, values = self.net.initial_inference(planes)
        priors = softmax(logits.cpu().numpy(), legal)
        rows = zip(hidden.cpu().numpy(), values.cpu().numpy(), legal, priors, strict=True)
        return [Leaf(h, float(v), mask, prior) for h, v, mask, prior in rows]

    def leaves(
        self,
        game: Game,
        positions: Sequence[np.ndarray],
        actions: Sequence[int],
        rng: np.random.Generator,
    ) -> list:
        import torch

        parents = torch.from_numpy(np.stack(positions)).to(self.device)
        with torch.inference_mode():
            s_next, rewards, logits, values = self.net.recurrent_inference(
                parents, torch.tensor(actions, device=self.device)
            )
        priors = softmax(logits.cpu().numpy())
        everything = np.ones(game.num_actions, dtype=bool)
        s_next, values, rewards = (x.cpu().numpy() for x in (s_next, values, rewards))
        rows = zip(s_next, values, priors, rewards, strict=True)
        return [Leaf(s, float(v), everything, prior, reward=r) for s, v, prior, r in rows]


def as_evaluator(evaluator: Evaluator | PolicyValue) -> Evaluator:
    """``evaluator`` itself, or a bare policy-value function as a :class:`PolicyValueEvaluator`."""
    # duck-typed as the Protocol's runtime check is, without its cost on every search
    if hasattr(evaluator, "roots") and hasattr(evaluator, "leaves"):
        return evaluator
    if callable(evaluator):
        return PolicyValueEvaluator(evaluator)
    raise TypeError(
        f"an evaluator must have roots() and leaves(), or be a policy-value function "
        f"(planes, legal) -> (priors, values); got {type(evaluator).__name__}."
    )
