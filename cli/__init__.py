"""The ``scalify-hlo`` command line (installed as ``scalify_hlo.cli``)."""
