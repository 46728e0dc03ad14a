"""The networks and what they need: ModelConfig, network (builds either kind), the transformer (per move or
board-packed), the graph model, priors, losses, loading (a saved model by path or shipped name) and export
(safetensors, jax.export)."""
