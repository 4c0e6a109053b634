"""The one exception type that the CLI turns into a clean one-line error and exit code 2."""


class UserError(Exception):
    """Bad input or configuration that the user can fix: reported in one line, no traceback."""
