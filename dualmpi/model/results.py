"""Read and check ``dualmpi bench`` results files (format ``dualmpi-bench/1``)."""

import json
import math
import os
from collections import namedtuple

from ..errors import DualmpiError
from ..resources import MiB, ResourceError, read_limited

__all__ = ["FORMAT", "STATS", "MAX_BYTES", "Results", "ResultsError", "load_results", "row_time"]

#: The largest results file fit and report read (a bench sweep writes a few hundred KiB);
#: larger files, /dev/zero or a FIFO are refused after reading this much.
MAX_BYTES = 64 * MiB

#: The value of the ``"format"`` key of a bench results file.
FORMAT = "dualmpi-bench/1"

#: Time statistics a row carries (seconds): min, mean and max over repetitions or ranks.
STATS = ("t_min", "t_avg", "t_max")

#: One results file: its path, ``meta`` dict, ping-pong rows and collective rows.
Results = namedtuple("Results", "path meta pingpong collectives")

_PINGPONG_KEYS = ("hops", "size", *STATS)
_COLLECTIVE_KEYS = ("collective", "size", "model", *STATS)


class ResultsError(DualmpiError, ValueError):
    """A file is not a readable ``dualmpi bench`` results file."""


def load_results(path):
    """Return the :class:`Results` in ``path`` or raise :class:`ResultsError` (one line).

    Parameters
    ----------
    path : str or os.PathLike
        A JSON file written by ``dualmpi bench`` (``"format": "dualmpi-bench/1"``).

    Returns
    -------
    Results
        ``pingpong`` and ``collectives`` are lists of dicts (``kind`` defaults to
        ``"emulated"``); rows are checked for the keys and types fit and report use.

    References
    ----------
    The results format: docs/model.md, "Results files".

    Examples
    --------
    >>> import json, os, tempfile
    >>> fd, name = tempfile.mkstemp(suffix=".json"); os.close(fd)
    >>> with open(name, "w") as f:
    ...     json.dump({"format": "dualmpi-bench/1", "meta": {}, "pingpong": [], "collectives": []}, f)
    >>> load_results(name).pingpong
    []
    >>> os.remove(name)
    """
    name = os.fspath(path)
    try:
        text = read_limited(name, MAX_BYTES, "results file")
    except ResourceError as exc:
        raise ResultsError(f"{exc}; not a dualmpi bench results file") from None
    except OSError as exc:
        raise ResultsError(f"{name}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ResultsError(f"{name}: not a dualmpi bench results file (not UTF-8 text)") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{name}: not valid JSON (truncated?): {exc.msg} at line {exc.lineno} "
                           f"column {exc.colno}") from None
    except (RecursionError, ValueError) as exc:
        raise ResultsError(f"{name}: not a dualmpi bench results file ({type(exc).__name__})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ResultsError(f'{name}: not a dualmpi bench results file (no "format": "{FORMAT}")')
    meta = doc.get("meta") or {}
    if not isinstance(meta, dict):
        raise ResultsError(f'{name}: "meta" must be an object')
    pingpong = _rows(name, doc, "pingpong", _PINGPONG_KEYS)
    collectives = _rows(name, doc, "collectives", _COLLECTIVE_KEYS)
    for i, row in enumerate(pingpong):
        row.setdefault("kind", "emulated")
        if row["kind"] not in ("emulated", "raw"):
            raise ResultsError(f'{name}: pingpong row {i}: "kind" must be "emulated" or "raw"')
        if row["size"] != int(row["size"]) or row["hops"] != int(row["hops"]):
            raise ResultsError(f"{name}: pingpong row {i}: size and hops must be whole numbers")
        if any(_is_number(row.get(k)) and row[k] < 0 for k in ("t_min", "t_avg", "t_max")):
            raise ResultsError(f"{name}: pingpong row {i}: negative time")
    for i, row in enumerate(collectives):
        if not isinstance(row["collective"], str):
            raise ResultsError(f'{name}: collectives row {i}: "collective" must be a name')
        model = row["model"]
        if not isinstance(model, dict) or not all(_is_number(model.get(k)) for k in ("ts", "tw", "th")):
            raise ResultsError(f'{name}: collectives row {i}: "model" must be {{"ts", "tw", "th"}} numbers')
    return Results(name, meta, pingpong, collectives)


def _rows(name, doc, key, required):
    """Return ``doc[key]`` (a list of row dicts, default empty) after checking each row."""
    rows = doc.get(key, [])
    if not isinstance(rows, list):
        raise ResultsError(f'{name}: "{key}" must be a list of rows')
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ResultsError(f"{name}: {key} row {i} is not an object")
        missing = [k for k in required if k not in row]
        if missing:
            raise ResultsError(f"{name}: {key} row {i} lacks {', '.join(missing)}")
        for k in required:
            if k not in ("collective", "model") and not _is_number(row[k]):
                raise ResultsError(f"{name}: {key} row {i}: {k} is not a number ({row[k]!r})")
        if row["size"] < 0 or ("hops" in required and row["hops"] < 0):
            raise ResultsError(f"{name}: {key} row {i}: negative size or hops")
        out.append(dict(row))
    return out


def _is_number(x):
    """Return True for a finite int or float (not a bool)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def row_time(row, stat="t_min"):
    """Return a row's time statistic ``stat`` in seconds.

    >>> row_time({"t_min": 1.0, "t_avg": 2.0, "t_max": 3.0}, "t_max")
    3.0
    """
    if stat not in STATS:
        raise DualmpiError(f"unknown time statistic {stat!r} (choose from {', '.join(STATS)})")
    return float(row[stat])
