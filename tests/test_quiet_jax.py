"""The command line drops the CUDA plugin's no-driver lines from stderr, and nothing else
(with the gpu-aot extra on a machine without a GPU driver, ``import jax`` prints them)."""

from __future__ import annotations

from scalify_hlo.cli.quiet_jax import without_driver_noise

NOISE = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
    "I0000 00:00:1795885902.360873   32257 cudart_stub.cc:31] Could not find cuda drivers on "
    "your machine, GPU will not be used.\n")


def test_the_no_driver_lines_are_dropped() -> None:
    assert without_driver_noise(NOISE * 3) == ""


def test_every_other_line_is_kept() -> None:
    other = ("E0000 00:00:1.0 1 cuda_plugin.cc:12] a real failure\n"
             "WARNING: something else\n"
             "I0000 00:00:1.0 1 cudart_stub.cc:31] Could not find cuda drivers, and more\n")
    assert without_driver_noise(NOISE + other + NOISE) == other
    assert without_driver_noise("no newline at the end") == "no newline at the end"
