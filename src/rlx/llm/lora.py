"""LoRA adapters with ``peft``: the trained model of a stage when ``lora=True``.

LoRA (Hu et al., 2021) freezes every weight ``W`` and learns a low-rank update beside chosen
linear layers:

    h = W x + (alpha / r) B A x          A: [r, d_in], B: [d_out, r], B = 0 at the start

so a stage trains ``r (d_in + d_out)`` numbers per adapted layer instead of ``d_in d_out``,
and the start model is the adapted model with the adapter switched off. The reference
``pi_ref`` of DPO, GRPO and RLHF-PPO is exactly that (:func:`reference_of`): no second copy
of the weights is kept.

A run with LoRA leaves ``RUN_DIR/adapter`` (``PeftModel.from_pretrained(base, folder)``
loads it) and ``RUN_DIR/model``, the adapter merged into the weights
(``AutoModelForCausalLM.from_pretrained`` loads it). A stage may also start from an adapter
folder (:func:`load_for_training`): the adapter then keeps training, and the reference is a
frozen copy of the start model (the adapter merged in).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from rlx.errors import ConfigError

ADAPTER_DIR = "adapter"
"""The run folder's LoRA adapter (``adapter_config.json`` and the adapter's weights)."""
ADAPTER_CONFIG = "adapter_config.json"
LORA_FIELDS = {"r": "lora_r", "lora_alpha": "lora_alpha", "lora_dropout": "lora_dropout",
               "target_modules": "lora_target_modules"}  # fmt: skip
"""``LoraConfig`` fields and the stage config fields that carry them."""


def lora_fields(overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` with ``lora`` given as a dict of ``LoraConfig`` fields or a
    ``peft.LoraConfig`` spelled as the flat config fields (``lora=True``, ``lora_r``, ...).
    Other ``LoraConfig`` fields are refused with one sentence naming those rlx takes."""
    lora = overrides.get("lora")
    if isinstance(lora, bool) or lora is None:
        return overrides
    if hasattr(lora, "to_dict") and hasattr(lora, "peft_type"):  # a peft.LoraConfig
        given = {k: v for k, v in lora.to_dict().items() if k in LORA_FIELDS}
    elif isinstance(lora, Mapping):
        unknown = sorted(set(lora) - set(LORA_FIELDS))
        if unknown:
            raise ConfigError(
                f"lora={dict(lora)!r}: rlx takes the LoraConfig fields {sorted(LORA_FIELDS)}, "
                f"not {unknown}."
            )
        given = dict(lora)
    else:
        raise ConfigError(
            f"lora={lora!r} must be True, a dict of LoraConfig fields or a peft.LoraConfig."
        )
    out = {**overrides, "lora": True}
    for key, value in given.items():
        if key == "target_modules" and value is not None:
            value = (value,) if isinstance(value, str) else tuple(sorted(value))
        out[LORA_FIELDS[key]] = value
    return out


def peft_config(config: Any, task_type: str = "CAUSAL_LM") -> Any:
    """The ``peft.LoraConfig`` of a stage config's ``lora_*`` fields; target modules None:
    every linear layer but the output head (peft's ``all-linear``)."""
    from peft import LoraConfig

    targets = config.lora_target_modules
    return LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(targets) if targets else "all-linear",
        task_type=task_type,
        modules_to_save=["score"] if task_type == "SEQ_CLS" else None,
    )


def is_adapter_folder(path: str | Path) -> bool:
    """Whether ``path`` holds a peft adapter (an ``adapter_config.json``)."""
    return (Path(path).expanduser() / ADAPTER_CONFIG).is_file()


def is_peft_model(model: Any) -> bool:
    """Whether ``model`` is a ``peft.PeftModel`` (an adapter on a frozen base)."""
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


def load_for_training(config: Any) -> tuple[Any, Any]:
    """``(model, tokenizer)`` a stage trains: ``config.model`` (a model folder, or an adapter
    folder whose adapter keeps training on its base model), with a new LoRA adapter when
    ``config.lora`` and gradient checkpointing when ``config.gradient_checkpointing``."""
    from rlx.llm.models import load_model

    if is_adapter_folder(config.model):
        model, tokenizer = load_adapter(config.model, config.device, config.dtype, trainable=True)
    else:
        model, tokenizer = load_model(config.model, device=config.device, dtype=config.dtype)
        if config.lora:
            model = new_adapter(model, config)
    if config.gradient_checkpointing:
        enable_gradient_checkpointing(model)
    return model, tokenizer


def new_adapter(model: Any, config: Any) -> Any:
    """``model`` with a new LoRA adapter, its ``A`` matrices drawn from ``config.seed`` alone:
    every data-parallel process starts from the same adapter whatever its own random stream,
    and the stream the stage samples from is left as it was."""
    import torch
    from peft import get_peft_model

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        return get_peft_model(model, peft_config(config))


def load_adapter(
    path: str | Path, device: str, dtype: str | None, *, trainable: bool = False
) -> tuple[Any, Any]:
    """The adapter in ``path`` on the base model its ``adapter_config.json`` names, as a
    ``PeftModel``, and the tokenizer (the adapter folder's, else the base's)."""
    from peft import PeftModel

    from rlx.llm.models import load_model, load_tokenizer, no_progress_bars
    from rlx.runs.files import load_json_file

    folder = Path(path).expanduser()
    recorded = load_json_file(folder / ADAPTER_CONFIG)  # bounded, never through a link
    base = recorded.get("base_model_name_or_path") if isinstance(recorded, dict) else None
    # a relative name is the adapter folder's (it travels with it), never the current folder's
    where = None if not isinstance(base, str) or not base else folder / Path(base).expanduser()
    if where is None or not where.is_dir():
        raise ConfigError(
            f"adapter folder {str(folder)!r} names the base model {base!r}, which is not a "
            "local folder (a relative name is read from the adapter folder); the adapter needs "
            "its base model here."
        )
    model, tokenizer = load_model(where, device=device, dtype=dtype)
    placed = next(model.parameters()).device  # "auto" decided by load_model
    if (folder / "tokenizer_config.json").is_file():
        tokenizer = load_tokenizer(folder)
    with no_progress_bars():
        adapted = PeftModel.from_pretrained(model, folder, is_trainable=trainable)
    return adapted.to(placed), tokenizer


def enable_gradient_checkpointing(model: Any) -> None:
    """Recompute activations in backward; with a frozen base (LoRA) the embeddings' output
    must require grad, or no gradient flows through the checkpointed blocks."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # its newer name in transformers
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    if is_peft_model(model):
        model.enable_input_require_grads()


class AdapterDisabled:
    """The reference ``pi_ref`` of a LoRA run: calling it runs the same model with its adapter
    switched off (the start model, since ``B = 0`` there), in eval mode as a frozen copy would
    be, without gradients."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad(), self.model.disable_adapter():
                return self.model(*args, **kwargs)
        finally:
            self.model.train(was_training)

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """The model's parameters (their device and dtype are the reference's)."""
        return self.model.parameters()


def reference_of(model: Any, start: str | Path = "") -> Any:
    """``pi_ref``, the start model: for a new LoRA adapter the model with its adapter
    disabled; otherwise a frozen copy (a run that starts from an adapter folder ``start``
    keeps that adapter's merged weights, since disabling it would give the base model)."""
    from rlx.llm.models import frozen_copy

    if is_peft_model(model) and not is_adapter_folder(start):
        return AdapterDisabled(model)
    return merged(frozen_copy(model))


def save_trained(model: Any, tokenizer: Any, run_dir: Path, model_dir: str) -> None:
    """The trained model into ``run_dir/model_dir``, a normal Hugging Face folder; for a LoRA
    model also ``run_dir/adapter`` (the adapter alone), and the folder holds the merged
    weights ``W + (alpha / r) B A``. The adapter is merged in place (no copy of the weights
    at the run's end), so this is the last use of a LoRA model."""
    from rlx.llm.models import save_pretrained

    if not is_peft_model(model):
        save_pretrained(model, tokenizer, run_dir / model_dir)
        return
    save_pretrained(model, tokenizer, run_dir / ADAPTER_DIR)
    save_pretrained(model.merge_and_unload(), tokenizer, run_dir / model_dir)


def merged(model: Any) -> Any:
    """A LoRA model with its adapter merged into its weights (any other model as it is)."""
    return model.merge_and_unload() if is_peft_model(model) else model


__all__ = [
    "ADAPTER_DIR",
    "AdapterDisabled",
    "enable_gradient_checkpointing",
    "is_adapter_folder",
    "is_peft_model",
    "load_adapter",
    "load_for_training",
    "lora_fields",
    "merged",
    "peft_config",
    "reference_of",
    "save_trained",
]
