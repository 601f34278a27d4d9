"""One exception family for everything zbsolve refuses, so callers catch one base class."""


class ZbsolveError(Exception):
    """Base class of every error zbsolve raises on purpose."""

    exit_code = 1


class UsageError(ZbsolveError):
    """A value or option given by the user is out of range or malformed."""

    exit_code = 2


class ProblemError(UsageError):
    """A problem definition field is invalid (the message names the field)."""


class ProfileError(UsageError):
    """A cost profile file is missing or malformed (the message names the key)."""


class ScheduleFileError(ZbsolveError):
    """A schedule file cannot be read: missing, truncated, wrong format or version."""


class MissingFileError(ScheduleFileError):
    """An input file does not exist or cannot be read: a usage error, not a bad schedule."""

    exit_code = 2


class ScheduleError(ZbsolveError):
    """A per-device op order that cannot run or does not describe the problem."""


class ValidationError(ZbsolveError):
    """A schedule breaks a rule of docs/design.md, "Semantics" (the message names the op)."""


class InfeasibleError(ZbsolveError):
    """The problem has no schedule (for example a memory limit that is too small)."""


class SolverError(ZbsolveError):
    """A solver could not produce a schedule (nothing found in time, or it failed)."""


class ExportError(ZbsolveError):
    """A schedule cannot be expressed in the requested export format: the request, not the
    schedule, is at fault (torch CSV of a two-pipe problem), as with an unwritable output."""

    exit_code = 2


class OutputError(ZbsolveError):
    """An output file cannot be written."""

    exit_code = 2


class ProblemWarning(UserWarning):
    """A valid problem whose numbers may mislead (for example an `fb_overlap` outside the
    range of docs/design.md, "F&B overlap")."""
