"""Training examples (installed as ``scalify_hlo.examples``): models written the way JAX users
write them, run in every precision mode by ``scalify_hlo.training``."""
