"""The training loop, its checkpoints, device sharding and training plots."""
