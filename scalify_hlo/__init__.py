"""scalify-hlo: scale propagation on StableHLO for FP8 / FP16 training of JAX models."""

__version__ = "0.1.0"
