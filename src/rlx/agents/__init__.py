"""Deep RL agents on Gymnasium envs, one file each (``dqn`` so far); each registers itself."""
