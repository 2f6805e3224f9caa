"""rlx.llm: aligning a language model (SFT, reward model, DPO, RLHF, GRPO), extra ``llm``.

```python
from rlx import llm
path = llm.make_tiny_lm("models/tiny", texts=["12+34=46"])
model, tokenizer = llm.load_model(path)
rows = llm.arithmetic(100, seed=0)      # VerifierExample("23+58=", "81"), ...
```

Modules: ``models`` (load any local causal LM, build a tiny one), ``data`` (files, data sets
and TRL's column shapes), ``chat`` (chat templates), ``tasks`` (rlx's row kinds, generated
tasks), ``rewards`` (TRL-style reward functions), ``lora`` (LoRA adapters with ``peft``),
``batching`` (tokenise, pad, log-probabilities),
``losses`` (Bradley-Terry, DPO, SFT), ``generation`` (greedy decoding, sampling, exact match),
``training`` and ``online`` (what the stages share), ``stages`` (one file per stage) and
``agent`` (a trained model as ``rlx.load`` returns it). Names load on first use, so
``from rlx import llm`` costs neither torch nor transformers until a function is called.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from rlx.errors import RLXError


class MissingExtraError(RLXError):
    """An optional dependency group (a pip "extra") is not installed."""


def _require_extra() -> None:
    missing = [
        name for name in ("transformers", "tokenizers") if importlib.util.find_spec(name) is None
    ]
    if missing:
        raise MissingExtraError(
            f"rlx.llm needs the `llm` extra ({', '.join(missing)} not installed): "
            "pip install 'rlx[llm]'"
        )


_require_extra()

# public name -> the module of rlx.llm that defines it
_EXPORTS: dict[str, str] = {
    # models
    "load_model": "models",
    "load_tokenizer": "models",
    "make_tiny_lm": "models",
    "make_tiny_chat_lm": "models",
    "character_tokenizer": "models",
    "count_parameters": "models",
    # tasks
    "SFTExample": "tasks",
    "PreferencePair": "tasks",
    "VerifierExample": "tasks",
    "load_sft_jsonl": "tasks",
    "load_preferences_jsonl": "tasks",
    "load_verifier_jsonl": "tasks",
    "load_prompts_jsonl": "tasks",
    "PromptExample": "tasks",
    "write_jsonl": "tasks",
    "arithmetic": "tasks",
    "arithmetic_sft": "tasks",
    "arithmetic_preferences": "tasks",
    "length_biased_preferences": "tasks",
    "gold_reward": "tasks",
    "task_texts": "tasks",
    # data in the ecosystem's shapes
    "read_rows": "data",
    "ChatExample": "data",
    "PromptRow": "data",
    # rewards
    "exact_match_reward": "rewards",
    "numeric_reward": "rewards",
    "math_reward": "rewards",
    "format_reward": "rewards",
    "python_tests_reward": "rewards",
    "stdio_tests_reward": "rewards",
    "REWARDS": "rewards",
    "get_reward": "rewards",
    "RewardFunction": "rewards",
    "RewardFunctionError": "rewards",
    "reward_set": "rewards",
    # LoRA adapters
    "load_adapter": "lora",
    # batching
    "TokenBatch": "batching",
    "EncodedSequence": "batching",
    "encode_prompt": "batching",
    "encode_prompt_completion": "batching",
    "pad_batch": "batching",
    "token_logprobs": "logprobs",
    "sequence_logprobs": "logprobs",
    "logprobs_from_logits": "logprobs",
    "completion_lengths": "batching",
    # losses
    "bradley_terry_loss": "losses",
    "dpo_loss": "losses",
    "sft_loss": "losses",
    # generation
    "greedy": "generation",
    "exact_match": "generation",
    "mistake_pairs": "generation",
    # training stages
    "sft": "rlx.align",
    "reward_model": "rlx.align",
    "dpo": "rlx.align",
    "grpo": "rlx.align",
    "rlhf": "rlx.align",
    "rlhf_pipeline": "rlx.align",
    # language models as agents: multi-turn episodes in text environments
    "TEXT_ENVS": "text_env",
    "EpisodeGRPOConfig": "episode_grpo",
    "EpisodePPOConfig": "episode_ppo",
    "HiddenNumberEnv": "text_env",
    "GymTextEnv": "text_env",
    "PythonToolEnv": "text_env",
    "ToolEnv": "text_env",
    "sandboxed_python": "text_env",
    "ToolError": "tool_calls",
    "OpenEnvTextEnv": "remote_env",
    "HTTPEnvClient": "remote_env",
    "openenv_text_env": "remote_env",
    "sample": "generation",
    "BagOfWordsRewardModel": "stages.reward_model",
    "load_reward_model": "stages.reward_model",
    "StageResult": "training",
    "LoadedModel": "agent",
    "save_pretrained": "models",
}

_SUBMODULES = frozenset(
    {
        "agent", "models", "data", "chat", "tasks", "rewards", "lora", "batching",
        "losses", "generation", "online", "training", "stages", "logprobs", "pairs",
        "precision", "parallel", "stage_config", "text_env", "episodes", "episode_grpo",
        "episode_ppo", "tool_calls",
    }
)  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module = _EXPORTS[name]  # a module of rlx.llm, or a face above it (rlx.align)
        where = module if module.startswith("rlx.") else f"rlx.llm.{module}"
        value = getattr(importlib.import_module(where), name)
        globals()[name] = value  # later look-ups skip __getattr__
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"rlx.llm.{name}")
    raise AttributeError(f"module 'rlx.llm' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*__all__, *_SUBMODULES})


__all__ = ["MissingExtraError", *sorted(_EXPORTS)]
