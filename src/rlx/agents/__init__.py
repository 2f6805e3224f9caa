"""Deep RL agents on Gymnasium envs, one file each; each registers itself with the registry."""
