"""``dualmpi export``: the networkx, GraphML, SimGrid and BookSim files describe the same network.

The networkx export is read back with networkx itself and its BFS diameter and degree histogram
compared with dualmpi's; the XML files are parsed with ``xml.etree`` and counted; every SimGrid
route is checked link by link against ``Topology.route``.
"""

import json
from collections import Counter
from xml.etree import ElementTree as ET

import pytest

from dualmpi.cli import main as cli_main
from dualmpi.errors import DualmpiError
from dualmpi.export import EXPORT_LIMIT, SIMGRID_FULL_ROUTES, booksim_anynet, edges, export, \
    graphml, networkx_json, simgrid_platform
from dualmpi.topology import from_spec
from dualmpi.topology.analysis import measured_properties, neighbor_table

nx = pytest.importorskip("networkx",
                         reason="networkx is in the test extra: pip install -e '.[test]'")

SPECS = ["hypercube:n=1", "hypercube:n=4", "dualcube:r=2", "dualcube:r=3", "metacube:k=1,m=2",
         "metacube:k=2,m=1"]
GRAPHML = {"g": "http://graphml.graphdrawing.org/xmlns"}


@pytest.fixture(params=SPECS)
def topo(request):
    """One small network."""
    return from_spec(request.param)


def dualmpi_degree_histogram(topo):
    """The degree histogram of ``topo`` from dualmpi's neighbour table (networkx's layout)."""
    table = neighbor_table(topo)
    degrees = [len(set(row) - {u}) for u, row in enumerate(table.tolist())]
    hist = [0] * (max(degrees) + 1)
    for d in degrees:
        hist[d] += 1
    return hist


def test_edges_lists_every_link_once(topo):
    """``edges`` yields each link once, u < v, with the dimension joining them."""
    found = list(edges(topo))
    assert len(found) == topo.formulas()["links"] == len(set((u, v) for u, v, _ in found))
    assert all(u < v and topo.neighbor(u, i) == v for u, v, i in found)


def test_networkx_export_matches_dualmpi(topo):
    """networkx reads the node-link JSON; its BFS diameter and degree histogram are dualmpi's."""
    data = json.loads(networkx_json(topo))
    graph = nx.node_link_graph(data)
    measured = measured_properties(topo)
    assert graph.number_of_nodes() == topo.num_nodes
    assert graph.number_of_edges() == measured["links"] == topo.formulas()["links"]
    assert nx.diameter(graph) == measured["diameter"] == topo.formulas()["diameter"]
    assert nx.degree_histogram(graph) == dualmpi_degree_histogram(topo)
    assert graph.graph["spec"] == topo.spec
    assert all(graph.nodes[u]["address"] == topo.format_node(u) for u in graph)
    assert all(graph.edges[u, v]["dimension"] == topo.dimension_of(u, v) for u, v in graph.edges
               if u < v)


def test_networkx_export_distances_match_routes():
    """networkx's shortest-path lengths equal dualmpi's closed-form distances on D_3."""
    topo = from_spec("dualcube:r=3")
    graph = nx.node_link_graph(json.loads(networkx_json(topo)))
    lengths = dict(nx.all_pairs_shortest_path_length(graph))
    assert all(lengths[u][v] == topo.distance(u, v)
               for u in range(topo.num_nodes) for v in range(topo.num_nodes))


def test_graphml_parses_and_matches(topo):
    """The GraphML parses (xml.etree and networkx) with p nodes and the network's links."""
    text = graphml(topo)
    root = ET.fromstring(text)
    assert len(root.findall("g:graph/g:node", GRAPHML)) == topo.num_nodes
    assert len(root.findall("g:graph/g:edge", GRAPHML)) == topo.formulas()["links"]
    graph = nx.parse_graphml(text, node_type=int)
    assert not graph.is_directed()
    exported = sorted(tuple(sorted(e)) for e in graph.edges)
    assert exported == sorted((u, v) for u, v, _ in edges(topo))
    assert graph.graph["spec"] == topo.spec
    assert graph.nodes[topo.num_nodes - 1]["address"] == topo.format_node(topo.num_nodes - 1)


def simgrid_zone(text):
    """Parse a SimGrid platform; return its one zone element."""
    root = ET.fromstring(text)
    assert root.tag == "platform" and root.get("version") == "4.1"
    (zone,) = root.findall("zone")
    return zone


def test_simgrid_platform_counts_and_routes(topo):
    """One host per node, one link per link, and dualmpi's route for every ordered pair."""
    zone = simgrid_zone(simgrid_platform(topo))
    p = topo.num_nodes
    assert zone.get("routing") == "Full"
    hosts = [h.get("id") for h in zone.findall("host")]
    assert hosts == [f"n{u}" for u in range(p)]
    links = {el.get("id") for el in zone.findall("link")}
    assert len(links) == len(zone.findall("link")) == topo.formulas()["links"]
    assert all(el.get("sharing_policy") == "SPLITDUPLEX" for el in zone.findall("link"))
    routes = zone.findall("route")
    assert len(routes) == p * (p - 1)
    for route in routes:
        src, dst = int(route.get("src")[1:]), int(route.get("dst")[1:])
        path = topo.route(src, dst)
        want = [(f"l{min(a, b)}-{max(a, b)}", "UP" if a < b else "DOWN")
                for a, b in zip(path, path[1:])]
        assert [(c.get("id"), c.get("direction")) for c in route] == want
        assert {c.get("id") for c in route} <= links
        assert route.get("symmetrical") == "NO"


def test_simgrid_large_network_routes_per_link():
    """Above SIMGRID_FULL_ROUTES nodes: shortest-path routing, one route per link direction."""
    topo = from_spec("dualcube:r=5")  # 512 nodes
    assert topo.num_nodes > SIMGRID_FULL_ROUTES
    zone = simgrid_zone(simgrid_platform(topo, bandwidth="10GBps", latency="2us"))
    links = topo.formulas()["links"]
    assert zone.get("routing") == "DijkstraCache"
    assert len(zone.findall("host")) == topo.num_nodes and len(zone.findall("link")) == links
    assert {el.get("bandwidth") for el in zone.findall("link")} == {"10GBps"}
    routes = zone.findall("route")
    assert len(routes) == 2 * links and all(len(r) == 1 for r in routes)


def test_booksim_anynet_one_line_per_router(topo):
    """One line per router: its terminal and exactly its neighbours' routers."""
    lines = booksim_anynet(topo).splitlines()
    assert len(lines) == topo.num_nodes
    for u, line in enumerate(lines):
        words = line.split()
        assert words[:4] == ["router", str(u), "node", str(u)]
        pairs = list(zip(words[4::2], words[5::2]))
        assert all(kind == "router" for kind, _ in pairs) and len(words) % 2 == 0
        neighbours = [int(v) for _, v in pairs]
        assert Counter(neighbours) == Counter(topo.neighbors(u))


def test_export_refuses_huge_networks():
    """More than EXPORT_LIMIT nodes is a one-line error."""
    topo = from_spec("hypercube:n=17")
    assert topo.num_nodes > EXPORT_LIMIT
    with pytest.raises(DualmpiError, match="at most 65,536 nodes"):
        export(topo, "booksim")


@pytest.mark.parametrize("fmt", ["networkx", "graphml", "simgrid", "booksim"])
def test_cli_export_to_file(fmt, tmp_path, capsys):
    """``dualmpi export SPEC --format F -o FILE`` writes what the writer returns."""
    out = tmp_path / f"d2.{fmt}"
    assert cli_main(["export", "dualcube:r=2", "--format", fmt, "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote dualcube:r=2 (8 nodes) as {fmt} to {out}"
    assert out.read_text() == export(from_spec("dualcube:r=2"), fmt)


def test_cli_export_to_stdout_and_errors(capsys, tmp_path):
    """Standard output by default; bad specs, huge networks and bad paths are one-line errors."""
    assert cli_main(["export", "hypercube:n=1", "-f", "booksim"]) == 0
    assert capsys.readouterr().out == "router 0 node 0 router 1\nrouter 1 node 1 router 0\n"
    for argv in (["export", "nosuch:x=1", "-f", "booksim"],
                 ["export", "hypercube:n=20", "-f", "networkx"],
                 ["export", "hypercube:n=2", "-f", "graphml", "-o", str(tmp_path / "no" / "x")]):
        assert cli_main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("dualmpi: error: ") and err.count("\n") == 1, err
