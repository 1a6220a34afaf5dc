"""Parse topology spec strings such as ``dualcube:r=3`` or ``metacube:k=2,m=3``."""

import re

from ..errors import SpecError
from .ccc import CubeConnectedCycles
from .dualcube import DualCube
from .hdn import HDN, RDN
from .hypercube import Hypercube
from .metacube import MetaCube
from .product import ProductGraph
from .reduced_hypercube import ReducedHypercube

__all__ = ["TOPOLOGIES", "parse_spec", "from_spec", "check_ascii_digits"]

#: Registered topologies: spec name -> (class, required parameter names in order).
TOPOLOGIES = {
    "hypercube": (Hypercube, ("n",)),
    "dualcube": (DualCube, ("r",)),
    "metacube": (MetaCube, ("k", "m")),
    "rh": (ReducedHypercube, ("k", "n")),
    "ccc": (CubeConnectedCycles, ("n",)),
    "product": (ProductGraph, ("base",)),
    "hdn": (HDN, ("base", "k", "s")),
    "rdn": (RDN, ("base", "k")),
}

_PARAM = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*([+-]?[0-9]+)\s*$")
#: A text-valued parameter (a class lists them in ``spec_strings`` and parses them itself).
_TEXT = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*([^\s=]+)\s*$")


def parse_spec(spec):
    """Split ``name:key=value,...`` into ``(name, {key: int})``; raise :class:`SpecError` if malformed.

    >>> parse_spec("metacube:k=2,m=3")
    ('metacube', {'k': 2, 'm': 3})
    """
    if not isinstance(spec, str) or not spec.strip():
        raise SpecError(f"empty topology spec; expected e.g. dualcube:r=3 ({_known()})")
    check_ascii_digits(spec, "spec", SpecError)
    name, sep, rest = spec.strip().partition(":")
    name = name.strip().lower()
    if name not in TOPOLOGIES:
        raise SpecError(f"unknown topology {name!r} in spec {spec!r} ({_known()})")
    params = {}
    strings = getattr(TOPOLOGIES[name][0], "spec_strings", ())
    for item in filter(None, (s.strip() for s in rest.split(","))) if sep else ():
        text, match = _TEXT.match(item), _PARAM.match(item)
        if text and text.group(1) in strings:
            key, value = text.group(1), text.group(2)
        elif match:
            key, value = match.group(1), int(match.group(2))
        else:
            also = "".join(f" or {k}=text" for k in strings)
            raise SpecError(f"malformed parameter {item!r} in spec {spec!r}; expected key=integer{also}")
        if key in params:
            raise SpecError(f"parameter {key} given twice in spec {spec!r}")
        params[key] = value
    wanted = TOPOLOGIES[name][1]
    missing = [k for k in wanted if k not in params]
    if missing:
        raise SpecError(f"spec {spec!r} is missing parameter {', '.join(missing)} (usage: {_usage(name)})")
    extra = [k for k in params if k not in wanted]
    if extra:
        raise SpecError(f"unknown parameter {', '.join(extra)} for {name} (usage: {_usage(name)})")
    return name, params


def from_spec(spec):
    """Return the :class:`~dualmpi.topology.base.Topology` a spec string describes.

    >>> from_spec("dualcube:r=3").num_nodes
    32
    """
    name, params = parse_spec(spec)
    cls, wanted = TOPOLOGIES[name]
    return cls(**{k: params[k] for k in wanted})


def check_ascii_digits(text, what="input", error=SpecError):
    """Raise ``error`` when ``text`` holds a digit other than ASCII ``0-9``; return ``text``.

    Python's ``int`` and ``str.isdigit`` accept any Unicode digit (``"\u0663"`` is 3,
    ``"\uff18"`` is 8) and ``isdigit`` even superscripts that ``int`` rejects; dualmpi
    reads numbers in specs, sizes and node ids as ASCII only, so that a number means
    the same on every rank, in every file and to every tool.

    >>> check_ascii_digits("dualcube:r=3")
    'dualcube:r=3'
    >>> check_ascii_digits("dualcube:r=\u0663")
    Traceback (most recent call last):
    ...
    dualmpi.errors.SpecError: input 'dualcube:r=\u0663' has the non-ASCII digit '\u0663' (U+0663); write numbers with the digits 0-9
    """
    for ch in str(text):
        if not ch.isascii() and (ch.isdigit() or ch.isdecimal() or ch.isnumeric()):
            raise error(f"{what} {text!r} has the non-ASCII digit {ch!r} (U+{ord(ch):04X}); "
                        "write numbers with the digits 0-9")
    return text


def _usage(name):
    """Return the spec template of one topology, e.g. ``metacube:k=K,m=M``."""
    return f"{name}:" + ",".join(f"{k}={k.upper()}" for k in TOPOLOGIES[name][1])


def _known():
    """Return the list of spec templates for error messages."""
    return "known: " + ", ".join(_usage(n) for n in TOPOLOGIES)
