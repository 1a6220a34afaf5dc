"""Cost model of the papers and its fit to measurements (numpy only, no MPI).

``formulas``: the papers' costs as coefficients (ts, tw, th) of T = ts*t_s + tw*m*t_w + th*t_h;
``fit``: t_s, t_w, t_h from ping-pongs per protocol regime, and collectives predicted;
``results``: reading ``dualmpi bench`` files; ``analysis``: both over several files;
``synthetic``: results files made from known parameters; ``predict``: the collectives predicted
from a two-rank calibration before they are measured.  See docs/model.md.
"""

from .analysis import analyze
from .fit import fit_pingpong, mdape, predict_rows
from .formulas import (
    PATTERNS,
    Coeffs,
    FormulaError,
    cut_through_formula,
    lower_bound,
    paper_formula,
    predict,
)
from .results import ResultsError, load_results

__all__ = [
    "PATTERNS",
    "Coeffs",
    "FormulaError",
    "ResultsError",
    "analyze",
    "cut_through_formula",
    "fit_pingpong",
    "load_results",
    "lower_bound",
    "mdape",
    "paper_formula",
    "predict",
    "predict_rows",
]
