"""Invalid-action masks, read from the env as sb3-contrib reads them.

An env says which actions are valid in the state it just returned, either

- in its info dict, ``info["action_mask"]`` (after ``reset`` and after every ``step``), or
- through a method ``env.action_masks()`` (sb3-contrib's ``MaskablePPO`` convention),

as booleans (or 0/1), one per action; for ``MultiDiscrete`` actions one per value of each
entry, side by side. :func:`mask_reader` finds which of the two an env uses, once, and returns
what reads the masks of a whole vector env, ``[N, n]`` (True: valid), after each step. The
agents use them as probability 0 for a policy and ``Q = -inf`` for DQN
(:mod:`rlx.core.distributions`, :mod:`rlx.core.targets`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from rlx.errors import EnvError

MASK_KEY = "action_mask"
MASK_METHOD = "action_masks"

MaskReader = Callable[[Mapping[str, Any]], np.ndarray]
"""``read(infos)``: the masks ``[N, n]`` of a vector env after a step whose info is ``infos``."""


def mask_reader(vec: Any, reset_infos: Mapping[str, Any], size: int | None) -> MaskReader | None:
    """What reads the action masks of ``vec``, or None when its env gives none.

    ``reset_infos`` is the info of ``vec.reset``; ``size`` the mask length the actions take
    (None: the actions take no mask, and an env giving one is an error).
    """
    if MASK_KEY in reset_infos:
        reader: MaskReader = lambda infos: masks_from_infos(infos, vec.num_envs, size)  # noqa: E731
    elif _has_mask_method(vec):
        reader = lambda infos: masks_from_method(vec, size)  # noqa: E731
    else:
        return None
    if size is None:
        raise EnvError(
            "this env gives action masks, which apply to Discrete and MultiDiscrete actions "
            "only; its action space is neither."
        )
    reader(reset_infos)  # checks the size once, before training starts
    return reader


def env_mask_size(vec: Any, reset_infos: Mapping[str, Any]) -> int | None:
    """The length of the masks a vector env gives (read from a copy's reset info or its
    ``action_masks()``), or None when it gives none."""
    if MASK_KEY in reset_infos:
        given = reset_infos.get("_" + MASK_KEY, np.ones(vec.num_envs, dtype=bool))
        rows = np.flatnonzero(given)
        return int(np.asarray(reset_infos[MASK_KEY][rows[0]]).size) if len(rows) else None
    if _has_mask_method(vec):
        return int(np.asarray(vec.call(MASK_METHOD)[0]).size)
    return None


def masks_from_infos(infos: Mapping[str, Any], num_envs: int, size: int | None) -> np.ndarray:
    """``infos["action_mask"]`` as ``[N, n]`` booleans; a copy whose info lacks it (Gymnasium's
    ``infos["_action_mask"]`` False) has every action valid."""
    masks = np.ones((num_envs, size or 0), dtype=bool)
    if MASK_KEY not in infos:
        return masks
    given = infos.get("_" + MASK_KEY, np.ones(num_envs, dtype=bool))
    rows = np.flatnonzero(given)
    if len(rows):
        masks[rows] = _checked(np.stack([np.asarray(infos[MASK_KEY][i]) for i in rows]), size)
    return masks


def single_env_mask(env: Any, info: Mapping[str, Any]) -> np.ndarray | None:
    """The mask of one (non-vector) env after a step or reset: ``info["action_mask"]``, else
    ``env.action_masks()``, else None (no mask)."""
    if MASK_KEY in info:
        return np.asarray(info[MASK_KEY]).astype(bool)
    try:
        method = env.get_wrapper_attr(MASK_METHOD)
    except AttributeError:
        return None
    return np.asarray(method()).astype(bool)


def masks_from_method(vec: Any, size: int | None) -> np.ndarray:
    """Every copy's ``action_masks()``, stacked ``[N, n]``."""
    return _checked(np.stack([np.asarray(m) for m in vec.call(MASK_METHOD)]), size)


def _has_mask_method(vec: Any) -> bool:
    try:
        vec.call(MASK_METHOD)
    except (AttributeError, NotImplementedError):
        return False
    return True


def _checked(masks: np.ndarray, size: int | None) -> np.ndarray:
    masks = np.asarray(masks).reshape(len(masks), -1)
    if masks.shape[1] != size:
        raise EnvError(
            f"the env's action masks hold {masks.shape[1]} flags, its actions need {size} "
            "(one per action; for MultiDiscrete one per value of each entry)."
        )
    return masks.astype(bool, copy=False)


def legal_or_all(masks: np.ndarray) -> np.ndarray:
    """``masks`` with a row that allows nothing (a terminal state's, say) allowing everything:
    an empty choice has no most likely action and no finite maximum."""
    return masks | ~masks.any(axis=-1, keepdims=True)


def takes_masks(act: Any) -> bool:
    """Whether an agent's ``act`` / ``act_batch`` takes ``action_mask=`` (rlx's agents do; a
    user's own agent may not, and then acts without the env's masks)."""
    import inspect

    try:
        parameters = inspect.signature(act).parameters
    except (TypeError, ValueError):
        return False
    return "action_mask" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


__all__ = [
    "MASK_KEY",
    "MASK_METHOD",
    "MaskReader",
    "env_mask_size",
    "legal_or_all",
    "mask_reader",
    "masks_from_infos",
    "masks_from_method",
    "single_env_mask",
    "takes_masks",
]
