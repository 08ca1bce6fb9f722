"""User-facing error types: each carries a one-line message fit for a CLI's stderr."""


class ScalifyError(Exception):
    """Base of every error a user can cause; the CLI prints it as one line, no traceback."""


class PipelineError(ScalifyError):
    """A pass pipeline string names an unknown pass or a bad option."""


class RewriteError(ScalifyError):
    """A pass cannot rewrite the module (unsupported op or type, strict mode)."""
