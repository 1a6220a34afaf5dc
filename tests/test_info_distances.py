"""``dualmpi info --json`` gives both average-distance conventions, named apart."""

import json

import pytest

from dualmpi.cli import main
from dualmpi.topology import from_spec


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("spec", ["dualcube:r=3", "metacube:k=2,m=1", "hypercube:n=4"])
def test_info_gives_both_average_distance_conventions(capsys, spec):
    """Papers: distance sum / p (node itself counted); networkx: / (p - 1)."""
    nx = pytest.importorskip("networkx")
    code, out, _ = run(capsys, "info", spec, "--json")
    doc = json.loads(out)
    topo = from_spec(spec)
    g = nx.Graph((u, topo.neighbor(u, d)) for u in range(topo.num_nodes)
                 for d in range(1, topo.degree + 1))
    assert doc["avg_distance_over_p_minus_1"] == pytest.approx(nx.average_shortest_path_length(g))
    assert doc["avg_distance_over_p"] == pytest.approx(doc["avg_distance"])
    p = topo.num_nodes
    assert doc["avg_distance_over_p"] * p == pytest.approx(doc["avg_distance_over_p_minus_1"] * (p - 1))
