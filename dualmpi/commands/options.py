"""Options of an emulated run: link shaping, switching, packets and the model clock (pure)."""

import math
from dataclasses import dataclass

from ..errors import InputError
from ..model.clock import SWITCHING, ClockParams, parse_shape
from ..engine.watchdog import DEFAULT_DEADLINE

__all__ = ["RunOptions", "make_options"]


@dataclass(frozen=True)
class RunOptions:
    """How ``dualmpi run`` and ``bench`` set up the engine (see :class:`dualmpi.Comm`).

    Attributes
    ----------
    shape : ClockParams or None
        Injected link parameters: the wall clock then follows them (the sender's port
        is held ``t_s + n*t_w`` per message, each forwarding hop adds ``t_h``).
    switching : str
        ``store-and-forward``: every hop moves the whole message, one round per hop.
        ``cut-through``: a routed message is split into ``packets`` that intermediate
        nodes forward as each arrives (pipelined).
    packets : int
        Packets per routed message under cut-through switching.
    model : ClockParams or None
        Parameters of an extra virtual clock whose finishing time is the model's
        predicted time of the run (defaults to ``shape``).
    watchdog : float
        Seconds a node may wait in one round before the job is aborted (0: never).
    drop : tuple or None
        ``(round, node)``: that node skips its sends of that round — a fault injected
        to exercise the watchdog.
    """

    shape: ClockParams = None
    switching: str = "store-and-forward"
    packets: int = 8
    model: ClockParams = None
    watchdog: float = DEFAULT_DEADLINE
    drop: tuple = None

    @property
    def model_clock(self):
        """The parameters of the predicting virtual clock, or None."""
        return self.model or self.shape


def make_options(shape=None, switching="store-and-forward", packets=8, model=None,
                 watchdog=DEFAULT_DEADLINE, drop=None):
    """Build :class:`RunOptions` from CLI strings, raising :class:`DualmpiError` on bad input."""
    if switching not in SWITCHING:
        raise InputError(f"bad switching {switching!r} (choose from {', '.join(SWITCHING)})")
    if not isinstance(packets, int) or not 1 <= packets <= 1024:
        raise InputError(f"bad packet count {packets!r}: 1..1024")
    try:
        shaped = _params(shape, switching)
        modeled = _params(model, switching)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if watchdog is None or not math.isfinite(watchdog) or watchdog < 0:
        raise InputError(f"bad watchdog deadline {watchdog!r}: seconds >= 0 (0 disables it)")
    return RunOptions(shaped, switching, packets, modeled, float(watchdog), _drop(drop))


def _drop(text):
    """Parse ``ROUND:NODE`` (the injected missing send) or return None."""
    if text is None:
        return None
    a, sep, b = str(text).partition(":")
    if not (sep and a.strip().isdigit() and b.strip().isdigit()):
        raise InputError(f"bad --inject-drop {text!r}: expected ROUND:NODE")
    return (int(a), int(b))


def _params(text, switching):
    """Return ClockParams from ``ts=..,tw=..,th=..`` text, or None."""
    if text is None:
        return None
    return ClockParams(**parse_shape(text), switching=switching)
