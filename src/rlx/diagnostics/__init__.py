"""Diagnostics: the doctor's rules over a run's metrics, the live doctor, run reports, and
readers for other libraries' logs (TensorBoard, Stable-Baselines3, TRL)."""
