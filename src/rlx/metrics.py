"""The metric vocabulary: every algorithm logs these names, the doctor reads them.

This module sits at the bottom of rlx and imports nothing: algorithms, the run folder's
logger, the doctor and the reports all take their names from here. Algorithms import the
constants instead of spelling strings, so a typo is an ImportError, not a silently empty plot.
Each name's meaning is in its comment and in the docs (Reference > Troubleshooting).
"""

from __future__ import annotations

# episodes
EPISODE_RETURN = "episode_return"  # undiscounted return of finished training episodes (mean)
EPISODE_LENGTH = "episode_length"  # length of finished training episodes (mean)
MC_RETURN = "mc_return"  # discounted return actually observed from states whose Q was logged
Q_START = "q_start"  # Q(s_0, a_0) estimated at the states whose mc_return is logged

# evaluation during training: deterministic episodes on a separate env copy every eval_every
# env steps (summary.json gives the final evaluation's figures under the same names)
EVAL_RETURN_MEAN = "eval_return_mean"  # mean undiscounted return of the evaluation episodes
EVAL_RETURN_STD = "eval_return_std"  # standard deviation of those returns
EVAL_LENGTH_MEAN = "eval_length_mean"  # mean length of the evaluation episodes
# the final evaluation's 95% interval of the mean return (Student's t over its episodes;
# summary.json, beside eval_episodes: how many episodes the headline figure rests on)
EVAL_RETURN_LOW = "eval_return_low"
EVAL_RETURN_HIGH = "eval_return_high"

# policy optimisation
APPROX_KL = "approx_kl"  # mean KL between the old and the new policy
CLIP_FRACTION = "clip_fraction"  # share of samples whose ratio was clipped
ENTROPY = "entropy"  # mean policy entropy
POLICY_LOSS = "policy_loss"
VALUE_LOSS = "value_loss"
EXPLAINED_VARIANCE = "explained_variance"  # 1 - Var[R - V] / Var[R]

# value learning
Q_MEAN = "q_mean"  # mean Q(s, a) of the actions taken
TD_ERROR = "td_error"  # mean |r + gamma * bootstrap - Q(s, a)|
EPSILON = "epsilon"  # exploration rate of epsilon-greedy
CRITIC_LOSS = "critic_loss"  # squared TD error of the Q critics (summed over twins)
ACTOR_LOSS = "actor_loss"  # the deterministic or soft actor objective (SAC, TD3)
ALPHA = "alpha"  # SAC entropy temperature

# optimisation
GRAD_NORM = "grad_norm"
EPISODES = "episodes"  # episodes finished so far (tabular agents, whose budget is episodes)
EPOCH = "epoch"  # passes over the training data so far, fractional (language-model stages)
GRADIENT_STEPS = "gradient_steps"  # gradient steps taken so far (off-policy agents)
LR = "lr"
LOSS = "loss"

# board games (AlphaZero, MuZero): one row per iteration of self-play and training; the arena
# adds vs_<opponent>_win|draw|loss (arena_metric, read by rlx.games.evaluation.arena_metrics)
GAME_LENGTH = "game_length"  # mean plies of the iteration's self-play games
FIRST_PLAYER_WIN = "first_player_win"  # share of those games the first player won
DRAW = "draw"  # share of those games drawn
POSITIONS = "positions"  # self-play moves that gave a training sample (before symmetries)
REWARD_LOSS = "reward_loss"  # MuZero: squared error of the rewards its model predicts
SELFPLAY_S = "selfplay_s"  # seconds of the iteration spent playing (and storing targets)
TRAIN_S = "train_s"  # seconds of the iteration spent in gradient steps

# language models
# KL(pi || pi_ref) of the policy to the frozen reference, estimated on completions sampled
# from pi with k3 terms, exp(r) - 1 - r with r = log pi_ref - log pi: non-negative, unbiased
KL_REF = "kl_ref"
# mean log pi(y|x) - log pi_ref(y|x) over fixed completions (DPO's preference data): how far
# the policy's likelihood of that data moved from the reference's; any sign, not a KL, since
# the completions were not sampled from pi
LOG_RATIO_REF = "log_ratio_ref"
RM_SCORE = "rm_score"
REWARD = "reward"
GOLD_REWARD = "gold_reward"  # reward under the task's ground truth, when there is one
RESPONSE_LENGTH = "response_length"
# share of the sampled completions cut at max_new_tokens before their eos (TRL's
# completions/clipped_ratio): their rewards score unfinished answers
TRUNCATED_FRACTION = "truncated_fraction"
# Pearson correlation, within a step's completions, of the (unnormalised) reward-model score
# with the completion's length: how much the reward model pays for length itself
REWARD_LENGTH_CORR = "reward_length_corr"
# GRPO: the standard deviation of the rewards within each prompt's group, averaged over the
# groups (what the group-relative advantage divides by; 0 in a group gives it no signal)
GROUP_REWARD_STD = "group_reward_std"
FRAC_ZERO_STD_GROUPS = "frac_zero_std_groups"
CHOSEN_REWARD = "chosen_reward"
REJECTED_REWARD = "rejected_reward"
REWARD_MARGIN = "reward_margin"
PAIR_ACCURACY = "pair_accuracy"
NLL_CHOSEN = "nll_chosen"  # DPO with rpo_alpha: -log pi(y+|x) per chosen token (RPO's term)
TOKEN_ACCURACY = "token_accuracy"  # share of target tokens the model predicts by argmax (SFT)
EXACT_MATCH = "exact_match"  # share of held-out prompts whose greedy completion is the answer
EVAL_ROWS = "eval_rows"  # held-out rows exact_match was measured on
# exact_match's 95% interval (Wilson's score interval over those rows)
EVAL_EXACT_MATCH_LOW = "eval_exact_match_low"
EVAL_EXACT_MATCH_HIGH = "eval_exact_match_high"
BETA = "beta"  # the KL coefficient in force (RLHF-PPO's adaptive controller moves it)
GENERATION_S = "generation_s"  # seconds of the step spent sampling completions (GRPO, PPO)
UPDATE_S = "update_s"  # seconds of the step after sampling: scoring, reference, gradient steps
# Language models as agents: multi-turn episodes in text environments (rlx.llm.episodes)
EPISODE_TURNS = "episode_turns"  # mean model turns per episode
# share of episodes cut by a budget (turns or tokens) before their task ended
EPISODE_TRUNCATED_FRACTION = "episode_truncated_fraction"
TOOL_ERROR_RATE = "tool_error_rate"  # share of tool calls (sandboxed programs) that failed
INVALID_ACTION_RATE = "invalid_action_rate"  # share of turns whose reply the env could not read
TURN_REWARD = "turn_reward"  # reward per turn: total reward / total turns of the batch
SUCCESS_RATE = "success_rate"  # share of episodes that solved their task
EVAL_SUCCESS_RATE = "eval_success_rate"  # the same on held-out env seeds, greedy replies
# its 95% interval (Wilson's, over the held-out episodes)
EVAL_SUCCESS_LOW = "eval_success_low"
EVAL_SUCCESS_HIGH = "eval_success_high"
EVAL_EPISODES = "eval_episodes"  # held-out episodes the success rate rests on
EVAL_EPISODE_REWARD = "eval_episode_reward"  # mean reward of the held-out episodes
EVAL_EPISODE_TURNS = "eval_episode_turns"  # their mean turns

ALL_METRICS: frozenset[str] = frozenset(
    value for name, value in dict(globals()).items() if name.isupper() and isinstance(value, str)
)
"""Every shared metric name (the arena's rates are :func:`arena_metric`'s)."""

ARENA_OUTCOMES = ("win", "draw", "loss")


def arena_metric(opponent: str, outcome: str) -> str:
    """The name of the share of arena games against ``opponent`` that ended in ``outcome``
    (``win``, ``draw``, ``loss``, from the agent's side): ``vs_<opponent>_<outcome>``, the
    opponent's name without hyphens."""
    return f"vs_{opponent.replace('-', '')}_{outcome}"


REWARD_PREFIX = "reward/"
"""GRPO logs each reward function's mean score as ``reward/<its name>`` (TRL's names)."""


def reward_component(name: str) -> str:
    """The name under which the reward function ``name``'s mean score is logged."""
    return f"{REWARD_PREFIX}{name}"


def is_arena_metric(name: str) -> bool:
    """Whether ``name`` is one of :func:`arena_metric`'s."""
    head, _, outcome = name.rpartition("_")
    return head.startswith("vs_") and len(head) > 3 and outcome in ARENA_OUTCOMES


EVALUATION_PREFIX = "eval_"
"""Evaluation figures are named ``eval_*`` (deep agents' evaluation episodes, the held-out
figures of the language-model stages: ``eval_loss``, ``eval_pair_accuracy`` ...), besides
``exact_match``."""


def is_evaluation(name: str) -> bool:
    """Whether a logged metric is an evaluation figure (held-out data, deterministic episodes)
    rather than a training one: what a callback's ``on_eval`` receives."""
    return name.startswith(EVALUATION_PREFIX) or name == EXACT_MATCH


# The metrics shown next to the progress bar, in this order, when an algorithm logs them.
PROGRESS_METRICS: tuple[str, ...] = (
    EPISODE_RETURN,
    EVAL_RETURN_MEAN,
    EPSILON,
    APPROX_KL,
    CLIP_FRACTION,
    TD_ERROR,
    LOSS,
    REWARD,
    KL_REF,
)
