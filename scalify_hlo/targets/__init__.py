"""Compile targets: which chip a step is rewritten for (``table``), and compiling for a
chip this machine does not have (``tpu``: XLA's TPU compiler from the ``tpu-aot`` extra)."""
