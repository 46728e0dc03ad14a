"""Configs, the training loop, checkpoints, device sharding and training plots."""
