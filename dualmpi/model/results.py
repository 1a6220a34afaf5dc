"""Read and check results files: ``dualmpi bench``, ``dualmpi run`` and ``launch/sweep`` output.

Every file carries ``"format": "NAME/VERSION"`` (docs/results.md): ``dualmpi-bench/1``
(ping-pong and collective rows), ``dualmpi-run/1`` (collective rows), and a sweep is a
folder of run files with an ``index.tsv``.  Run files written before the tag existed
(``{"meta", "rows"}`` and no ``format``) are read as ``dualmpi-run/1``.
"""

import json
import math
import os
from collections import namedtuple

from ..errors import DualmpiError
from ..resources import MiB, ResourceError, read_limited

__all__ = ["FORMAT", "BENCH_FORMAT", "RUN_FORMAT", "FORMATS", "STATS", "MAX_BYTES", "Results",
           "ResultsError", "load_results", "load_any", "row_time"]

#: The largest results file fit and report read (a bench sweep writes a few hundred KiB);
#: larger files, /dev/zero or a FIFO are refused after reading this much.
MAX_BYTES = 64 * MiB

#: The value of the ``"format"`` key of a bench results file.
FORMAT = BENCH_FORMAT = "dualmpi-bench/1"

#: The value of the ``"format"`` key of a ``dualmpi run --json`` file.
RUN_FORMAT = "dualmpi-run/1"

#: The formats :func:`load_results` reads.
FORMATS = (BENCH_FORMAT, RUN_FORMAT)

#: Time statistics a row carries (seconds): min, mean and max over repetitions or ranks.
STATS = ("t_min", "t_avg", "t_max")

#: One results file: its path, ``meta`` dict, ping-pong rows, collective rows and ``format``.
Results = namedtuple("Results", "path meta pingpong collectives format", defaults=(BENCH_FORMAT,))

_PINGPONG_KEYS = ("hops", "size", *STATS)
_COLLECTIVE_KEYS = ("collective", "size", "model", *STATS)


class ResultsError(DualmpiError, ValueError):
    """A file is not a readable ``dualmpi bench`` results file."""


def load_results(path):
    """Return the :class:`Results` in ``path`` or raise :class:`ResultsError` (one line).

    Parameters
    ----------
    path : str or os.PathLike
        A JSON file written by ``dualmpi bench`` (``"format": "dualmpi-bench/1"``) or by
        ``dualmpi run --json`` (``"dualmpi-run/1"``, or untagged ``{"meta", "rows"}``).

    Returns
    -------
    Results
        ``pingpong`` and ``collectives`` are lists of dicts (``kind`` defaults to
        ``"emulated"``); rows are checked for the keys and types fit and report use.  A run
        file has no ping-pong rows; its ``rows`` are the collectives, and a row without
        ``model`` gets the coefficients of its schedule (``dualmpi simulate``), as ``run``
        itself computes them.

    References
    ----------
    The results formats: docs/results.md.

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
    fmt = doc.get("format") if isinstance(doc, dict) else None
    rows = doc.get("rows") if isinstance(doc, dict) else None
    if fmt is None and isinstance(rows, list) and rows and "meta" in doc and all(
            isinstance(r, dict) and "collective" in r for r in rows):
        fmt = RUN_FORMAT  # run files written before the format tag
    if fmt not in FORMATS:
        what = f'"format": "{fmt}"' if isinstance(fmt, str) else "no \"format\""
        raise ResultsError(f"{name}: not a dualmpi results file ({what}; fit and report read "
                           f"{', '.join(FORMATS)} and sweep folders)")
    meta = doc.get("meta") or {}
    if not isinstance(meta, dict):
        raise ResultsError(f'{name}: "meta" must be an object')
    if fmt == RUN_FORMAT:
        pingpong = []
        collectives = _with_models(name, meta, _rows(name, doc, "rows", _COLLECTIVE_KEYS[:2] + STATS))
    else:
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
    return Results(name, meta, pingpong, collectives, fmt)


def _with_models(name, meta, rows):
    """Return run ``rows`` with ``model`` filled from the schedule where the file lacks it."""
    from ..simulator import simulate
    from ..topology import from_spec

    models = {}
    for i, row in enumerate(rows):
        if "model" in row:
            continue
        spec = row.get("spec", meta.get("spec"))
        key = (spec, row["collective"], row.get("root") or 0)
        if key not in models:
            try:
                topo = from_spec(spec)
                if topo.num_nodes > 4096:
                    raise DualmpiError("too large")
                models[key] = simulate(topo, key[1], topo.check_node(key[2]))["model"]
            except (DualmpiError, TypeError, ValueError):
                raise ResultsError(f"{name}: rows row {i}: no \"model\" and none derivable for "
                                   f"{key[1]} on {spec!r}") from None
        row["model"] = dict(models[key])
    return rows


def load_any(path):
    """Return the list of :class:`Results` in ``path``: a results file or a sweep folder.

    A folder is read as a ``launch/sweep`` output: the JSON files its ``index.tsv`` names
    (runs that failed, exit code other than 0, are skipped), or every ``*.json`` in it
    when there is no index.

    >>> load_any("no/such/dir.json")
    Traceback (most recent call last):
    ...
    dualmpi.model.results.ResultsError: no/such/dir.json: cannot read: No such file or directory
    """
    name = os.fspath(path)
    if not os.path.isdir(name):
        return [load_results(name)]
    index = os.path.join(name, "index.tsv")
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as f:
            lines = [line.rstrip("\n").split("\t") for line in f if line.strip()]
        head, body = lines[0], lines[1:]
        if "json" not in head:
            raise ResultsError(f"{index}: no json column (not a launch/sweep index)")
        col, ok = head.index("json"), head.index("exit") if "exit" in head else None
        files = [row[col] for row in body if len(row) > col and (ok is None or row[ok] == "0")]
    else:
        files = sorted(f for f in os.listdir(name) if f.endswith(".json"))
    if not files:
        raise ResultsError(f"{name}: a folder without results files (no index.tsv rows, no *.json)")
    return [load_results(os.path.join(name, f)) for f in files]


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
