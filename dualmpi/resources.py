"""Estimate-and-refuse: check a job's memory and work against the machine before allocating.

A command estimates what it will need (bytes, seconds) from its inputs alone, then calls
:func:`require_memory` / :func:`require_time`, which raise :class:`ResourceError` (an
:class:`~dualmpi.errors.InputError`, so the CLI prints one line and exits 2) when the
estimate does not fit::

    dualmpi: error: simulate alltoall on hypercube:n=12 (schedule replay) needs 31.4 GiB,
    the machine has 22.1 GiB available

Available memory is ``MemAvailable`` of ``/proc/meminfo`` (``os.sysconf`` elsewhere),
capped by the cgroup v2 limit of the process when there is one (containers, Slurm).
Pure Python: no MPI, no numpy.
"""

import math
import os

from .errors import InputError

__all__ = [
    "ResourceError",
    "GiB",
    "MiB",
    "TIME_LIMIT_S",
    "available_memory",
    "format_bytes",
    "format_seconds",
    "require_memory",
    "require_time",
    "read_limited",
]

#: Bytes in a mebibyte and a gibibyte.
MiB = 1 << 20
GiB = 1 << 30

#: Default longest estimated run a command accepts (seconds): 10 minutes.
TIME_LIMIT_S = 600.0


class ResourceError(InputError):
    """A request needs more memory, time or input than the machine or the command allows."""


#: Files read again and again, kept open: ``{path: (process id, descriptor or None)}``
#: (None: the file could not be opened; a forked child opens its own).
_KEPT = {}


def _read_kept(path):
    """Return the bytes of the file at ``path`` read from its start, or None.

    The file is opened once per process and read again with ``pread`` at each call: a
    procfs or cgroup file shows its values as they are at the read, and a call then costs
    one system call instead of an open, a read and a close (a call with a count table
    never seen reads the host's memory: :func:`dualmpi.calls._budget`).
    """
    path = os.fspath(path)
    pid = os.getpid()
    kept = _KEPT.get(path)
    if kept is None or kept[0] != pid:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            fd = None
        _KEPT[path] = kept = (pid, fd)
    if kept[1] is None:
        return None
    try:
        return os.pread(kept[1], 1 << 16, 0)
    except OSError:
        return None


def _meminfo_available(path="/proc/meminfo"):
    """Return ``MemAvailable`` in bytes from ``path``, or None when it cannot be read."""
    text = _read_kept(path)
    if text is None:
        return None
    at = text.find(b"MemAvailable:")
    if at < 0:
        return None
    try:
        return int(text[at + 13:].split(None, 1)[0]) * 1024
    except (ValueError, IndexError):
        return None


def _cgroup_headroom(root="/sys/fs/cgroup"):
    """Return ``memory.max - memory.current`` of the cgroup v2 root in bytes, or None if unlimited."""
    limit = _read_kept(os.path.join(root, "memory.max"))
    if limit is None or limit.strip() == b"max":
        return None
    current = _read_kept(os.path.join(root, "memory.current"))
    try:
        return max(int(limit.strip()) - int(current.strip()), 0)
    except (AttributeError, ValueError):
        return None


def available_memory():
    """Return the bytes this process may still allocate without swapping (best estimate).

    ``MemAvailable`` from ``/proc/meminfo`` (Linux), else the free physical pages from
    ``os.sysconf``, capped by the cgroup v2 headroom when a memory limit is set.

    Returns
    -------
    int
        Bytes; 0 only when nothing can be read (then every check refuses large requests).

    Examples
    --------
    >>> available_memory() > 0
    True
    """
    found = _meminfo_available()
    if found is None:
        try:
            found = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            found = 0
    cap = _cgroup_headroom()
    return found if cap is None else min(found, cap)


def format_bytes(n):
    """Return ``n`` bytes in the largest binary unit that keeps a value >= 1, three digits.

    The value is rounded before its unit is chosen (never an exponent: a size just under a
    unit reads as one of that unit).

    >>> format_bytes(512), format_bytes(3 * MiB // 2), format_bytes(40 * GiB), format_bytes(2**50)
    ('512 B', '1.5 MiB', '40 GiB', '1 PiB')
    >>> format_bytes(1023.9 * 1024), format_bytes(1023.9)
    ('1 MiB', '1 KiB')
    """
    n = float(n)
    if abs(n) < 1024 and abs(round(n)) < 1024:
        return f"{n:.0f} B"
    return _in_units(abs(n), _BYTE_UNITS, lambda unit: 3, sign="-" if n < 0 else "")


_BYTE_UNITS = tuple((unit, 1024.0 ** (8 - i)) for i, unit in
                    enumerate(("YiB", "ZiB", "EiB", "PiB", "TiB", "GiB", "MiB", "KiB")))


def format_seconds(s):
    """Return a duration for humans, from nanoseconds to years, never in exponent notation.

    Seconds keep two significant digits, the other units three; the value is rounded before
    its unit is chosen, so a duration just under a unit's size reads as one of that unit.

    >>> format_seconds(4.2), format_seconds(150), format_seconds(7200), format_seconds(3.1536e9)
    ('4.2 s', '2.5 min', '2 h', '100 years')
    >>> format_seconds(0.2), format_seconds(0.0009996), format_seconds(2.5e-5), format_seconds(59.99)
    ('200 ms', '1 ms', '25 us', '1 min')
    """
    if not math.isfinite(s):
        return "forever"
    if s <= 0:
        return f"{s:g} s"
    return _in_units(s, _TIME_UNITS, lambda unit: 2 if unit == "s" else 3)


_TIME_UNITS = (("years", 365 * 86400), ("days", 86400), ("h", 3600), ("min", 60), ("s", 1),
               ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9))


def _in_units(value, units, digits, sign=""):
    """``value`` (> 0) in the first of ``units`` (largest first) where it rounds to >= 1.

    ``digits(unit)`` is the count of significant digits kept; the last unit takes any value.
    """
    for unit, size in units:
        kept = float(f"{value / size:.{digits(unit)}g}")
        if kept >= 1 or unit == units[-1][0]:
            return f"{sign}{kept:f}".rstrip("0").rstrip(".") + f" {unit}"


def require_memory(needed, what, available=None, fraction=0.8):
    """Raise :class:`ResourceError` unless ``needed`` bytes fit in ``fraction`` of the available memory.

    Parameters
    ----------
    needed : int or float
        Estimated peak bytes of the request.
    what : str
        The request, as the error message's subject (e.g. ``"embed --cycles on dualcube:r=12"``).
    available : int, optional
        Bytes available (default: :func:`available_memory`); tests pass a figure.
    fraction : float
        Share of the available memory a request may take (the rest is headroom for
        the estimate's error and for other processes).

    Returns
    -------
    int
        ``needed`` rounded up, when it fits.

    Examples
    --------
    >>> require_memory(3 * GiB, "a test", available=16 * GiB)
    3221225472
    >>> require_memory(40 * GiB, "a test", available=16 * GiB)
    Traceback (most recent call last):
    ...
    dualmpi.resources.ResourceError: a test needs 40 GiB, the machine has 16 GiB available
    """
    avail = available_memory() if available is None else available
    if not needed <= fraction * avail:  # also refuses NaN and infinity
        raise ResourceError(f"{what} needs {format_bytes(needed)}, the machine has "
                            f"{format_bytes(avail)} available")
    return int(math.ceil(needed))


def require_time(seconds, what, limit=TIME_LIMIT_S, hint=""):
    """Raise :class:`ResourceError` when the estimated run time exceeds ``limit`` seconds.

    Parameters
    ----------
    seconds : float
        Estimated wall time of the request on this machine.
    what : str
        The request, as the error message's subject.
    limit : float
        Longest accepted estimate (default :data:`TIME_LIMIT_S`).
    hint : str
        Appended to the message after ``"; "`` (e.g. what to use instead).

    Examples
    --------
    >>> require_time(30, "a test")
    30
    >>> require_time(7200, "a test", hint="try a smaller network")
    Traceback (most recent call last):
    ...
    dualmpi.resources.ResourceError: a test needs about 2 h (limit 10 min); try a smaller network
    """
    if not seconds <= limit:
        tail = f"; {hint}" if hint else ""
        raise ResourceError(f"{what} needs about {format_seconds(seconds)} "
                            f"(limit {format_seconds(limit)}){tail}")
    return seconds


def read_limited(path, limit, what="input file", binary=False):
    """Return the contents of ``path``, refusing files larger than ``limit`` bytes.

    Reads at most ``limit + 1`` bytes, so ``/dev/zero``, a FIFO or a file still growing
    cannot exhaust memory.

    Raises
    ------
    ResourceError
        The file has more than ``limit`` bytes.
    OSError
        It cannot be opened or read (the caller words that message).
    UnicodeDecodeError
        ``binary`` is false and the bytes are not UTF-8.

    Examples
    --------
    >>> read_limited("/dev/zero", 1000)
    Traceback (most recent call last):
    ...
    dualmpi.resources.ResourceError: /dev/zero: input file larger than 1000 B (the limit)
    """
    name = os.fspath(path)
    with open(name, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ResourceError(f"{name}: {what} larger than {format_bytes(limit)} (the limit)")
    return data if binary else data.decode("utf-8")
