"""The ``scalify-hlo`` command line (installed as ``scalify_hlo.cli``).

jax is imported here first, without the CUDA plugin's no-driver noise (``quiet_jax.py``):
every command imports it, and those lines would come before a one-line error."""

from scalify_hlo.cli.quiet_jax import import_jax_quietly

import_jax_quietly()
