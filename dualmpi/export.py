"""Export a network for other tools: networkx node-link JSON, GraphML, SimGrid and BookSim.

Every writer is a pure function of a :class:`~dualmpi.topology.base.Topology` that returns
the file's text, so the same network dualmpi emulates can be analysed in networkx or Gephi
and cross-checked in the SimGrid and BookSim simulators:

* ``networkx``: networkx's node-link JSON (``"nodes"`` / ``"edges"``, the keys of networkx
  3.4 and later; older networkx reads it with ``node_link_graph(data, link="edges")``);
* ``graphml``: GraphML, undirected, node ids ``"0"`` .. ``"p-1"``;
* ``simgrid``: a SimGrid platform (version 4.1): one host per node, one full-duplex link per
  virtual link, and up to :data:`SIMGRID_FULL_ROUTES` nodes one route per ordered pair of
  nodes along dualmpi's route (``Topology.route``); larger networks get one route per link
  direction and SimGrid's shortest-path routing, since all-pairs routes grow as p^2;
* ``booksim``: a BookSim 2 ``anynet`` network file: router ``u`` with terminal node ``u``
  and its neighbour routers; BookSim computes its own minimal routes.

Node attributes are the address the paper writes (``format_node``) and its fields (class,
cluster, node id); each link carries the dimension that joins its two ends (seen from the
smaller node id).
"""

import json
from xml.sax.saxutils import escape, quoteattr

from . import __version__
from .errors import DualmpiError

__all__ = [
    "FORMATS",
    "EXPORT_LIMIT",
    "SIMGRID_FULL_ROUTES",
    "edges",
    "node_link_data",
    "networkx_json",
    "graphml",
    "simgrid_platform",
    "booksim_anynet",
    "export",
]

#: Largest network (in nodes) any writer exports; the files grow with p * degree.
EXPORT_LIMIT = 1 << 16

#: Largest network whose SimGrid platform lists dualmpi's route for every ordered pair.
SIMGRID_FULL_ROUTES = 256

_GRAPHML_NS = "http://graphml.graphdrawing.org/xmlns"


def _check_size(topo):
    """Raise :class:`DualmpiError` when ``topo`` is too large to export."""
    if topo.num_nodes > EXPORT_LIMIT:
        raise DualmpiError(f"{topo.spec} has {topo.num_nodes:,} nodes; export writes networks of "
                           f"at most {EXPORT_LIMIT:,} nodes")


def edges(topo):
    """Yield every link once as ``(u, v, dimension)`` with ``u < v``.

    Parameters
    ----------
    topo : Topology
        The network.

    Returns
    -------
    iterator of (int, int, int)
        The links in order of ``u``, then dimension; ``dimension`` is the ``i`` with
        ``topo.neighbor(u, i) == v``.

    Examples
    --------
    >>> from dualmpi.topology import from_spec
    >>> list(edges(from_spec("dualcube:r=2")))[:3]
    [(0, 1, 1), (0, 4, 2), (1, 5, 2)]
    """
    for u in range(topo.num_nodes):
        for i, v in enumerate(topo.neighbors(u), start=1):
            if u < v:
                yield u, v, i


def _graph_attrs(topo):
    """Return the graph-level metadata every format carries."""
    return {
        "name": topo.spec,
        "spec": topo.spec,
        "topology": topo.name,
        "nodes": topo.num_nodes,
        "degree": topo.degree,
        "reference": topo.reference,
        "generator": f"dualmpi {__version__} export",
    }


def _node_attrs(topo, u):
    """Return the attributes of node ``u``: its address and address fields."""
    out = {"address": topo.format_node(u)}
    out.update({str(k): int(v) for k, v in topo.fields(u).items()})
    return out


def node_link_data(topo):
    """Return ``topo`` as networkx node-link data (a JSON-serializable dict).

    Parameters
    ----------
    topo : Topology
        The network (at most :data:`EXPORT_LIMIT` nodes).

    Returns
    -------
    dict
        ``{"directed": False, "multigraph": False, "graph": {...}, "nodes": [{"id": u, ...}],
        "edges": [{"source": u, "target": v, "dimension": i}]}``, which
        ``networkx.node_link_graph`` turns into a ``Graph``.

    References
    ----------
    networkx, ``networkx.readwrite.json_graph.node_link_data`` (node-link format).

    Examples
    --------
    >>> from dualmpi.topology import from_spec
    >>> data = node_link_data(from_spec("hypercube:n=2"))
    >>> data["nodes"][3]["id"], data["edges"][0]
    (3, {'source': 0, 'target': 1, 'dimension': 1})
    """
    _check_size(topo)
    return {
        "directed": False,
        "multigraph": False,
        "graph": _graph_attrs(topo),
        "nodes": [{"id": u, **_node_attrs(topo, u)} for u in range(topo.num_nodes)],
        "edges": [{"source": u, "target": v, "dimension": i} for u, v, i in edges(topo)],
    }


def networkx_json(topo):
    """Return :func:`node_link_data` as JSON text.

    Examples
    --------
    >>> from dualmpi.topology import from_spec
    >>> networkx_json(from_spec("hypercube:n=1"))[:40]
    '{"directed": false, "multigraph": false,'
    """
    return json.dumps(node_link_data(topo)) + "\n"


def graphml(topo):
    """Return ``topo`` as a GraphML document (undirected; node ids ``"0"`` .. ``"p-1"``).

    Parameters
    ----------
    topo : Topology
        The network (at most :data:`EXPORT_LIMIT` nodes).

    Returns
    -------
    str
        The XML text: graph data (spec, reference, ...), per node ``address`` and the
        address fields, per edge ``dimension``.

    References
    ----------
    The GraphML format, http://graphml.graphdrawing.org/ (``networkx.read_graphml`` reads it).

    Examples
    --------
    >>> from dualmpi.topology import from_spec
    >>> from xml.etree import ElementTree as ET
    >>> root = ET.fromstring(graphml(from_spec("dualcube:r=2")))
    >>> ns = {"g": "http://graphml.graphdrawing.org/xmlns"}
    >>> len(root.findall("g:graph/g:node", ns)), len(root.findall("g:graph/g:edge", ns))
    (8, 8)
    """
    _check_size(topo)
    graph_attrs = _graph_attrs(topo)
    node_attrs = [_node_attrs(topo, u) for u in range(topo.num_nodes)]
    node_keys = list(dict.fromkeys(k for attrs in node_attrs for k in attrs))
    out = ["<?xml version='1.0' encoding='utf-8'?>", f"<graphml xmlns={quoteattr(_GRAPHML_NS)}>"]
    out += [_graphml_key("graph", name, value) for name, value in graph_attrs.items()]
    for name in node_keys:
        sample = next(attrs[name] for attrs in node_attrs if name in attrs)
        out.append(_graphml_key("node", name, sample))
    out.append(_graphml_key("edge", "dimension", 1))
    out.append(f'  <graph id={quoteattr(topo.spec)} edgedefault="undirected">')
    out += [_graphml_data("graph", name, value, "    ") for name, value in graph_attrs.items()]
    for u, attrs in enumerate(node_attrs):
        out.append(f'    <node id="{u}">')
        out += [_graphml_data("node", name, value, "      ") for name, value in attrs.items()]
        out.append("    </node>")
    for u, v, i in edges(topo):
        out.append(f'    <edge source="{u}" target="{v}">{_graphml_data("edge", "dimension", i)}'
                   "</edge>")
    out += ["  </graph>", "</graphml>"]
    return "\n".join(out) + "\n"


def _graphml_key(domain, name, sample):
    """Return the ``<key>`` declaring attribute ``name`` of ``domain``, typed like ``sample``."""
    kind = "int" if isinstance(sample, int) else "string"
    return (f'  <key id={quoteattr(f"{domain}_{name}")} for="{domain}" '
            f'attr.name={quoteattr(name)} attr.type="{kind}"/>')


def _graphml_data(domain, name, value, indent=""):
    """Return ``<data key="domain_name">value</data>``."""
    return f"{indent}<data key={quoteattr(f'{domain}_{name}')}>{escape(str(value))}</data>"


def simgrid_platform(topo, bandwidth="1GBps", latency="1us", speed="1Gf"):
    """Return a SimGrid platform file (version 4.1) for ``topo``.

    Parameters
    ----------
    topo : Topology
        The network (at most :data:`EXPORT_LIMIT` nodes).
    bandwidth, latency : str
        Every link's bandwidth and latency, with SimGrid units (``"1GBps"``, ``"1us"``).
    speed : str
        Every host's speed (``"1Gf"``).

    Returns
    -------
    str
        One ``<zone>`` with host ``n<u>`` per node (its address as a property), one
        full-duplex link ``l<u>-<v>`` (``sharing_policy="SPLITDUPLEX"``, ``u < v``) per link,
        and ``<route symmetrical="NO">`` elements whose ``<link_ctn>`` list follows the links
        of a route, direction ``UP`` from ``u`` to ``v`` and ``DOWN`` back. Up to
        :data:`SIMGRID_FULL_ROUTES` nodes the zone routes ``"Full"``: one route per ordered
        pair, along ``topo.route(src, dst)``. Larger networks get ``routing="DijkstraCache"``
        and one route per link direction, so SimGrid routes along shortest paths, which have
        the length of dualmpi's routes where those are shortest but may use other links.

    References
    ----------
    SimGrid XML reference (``<platform version="4.1">``, ``<zone>``, ``<host>``, ``<link>``,
    ``<route>``, ``<link_ctn>``), https://simgrid.org/doc/latest/XML_reference.html.

    Examples
    --------
    >>> from dualmpi.topology import from_spec
    >>> from xml.etree import ElementTree as ET
    >>> zone = ET.fromstring(simgrid_platform(from_spec("dualcube:r=2"))).find("zone")
    >>> zone.get("routing"), len(zone.findall("host")), len(zone.findall("link"))
    ('Full', 8, 8)
    >>> from_spec("dualcube:r=2").route(0, 3)
    [0, 4, 6, 2, 3]
    >>> [(c.get("id"), c.get("direction")) for c in zone.find("route[@src='n0'][@dst='n3']")]
    [('l0-4', 'UP'), ('l4-6', 'UP'), ('l2-6', 'DOWN'), ('l2-3', 'UP')]
    """
    _check_size(topo)
    p = topo.num_nodes
    full = p <= SIMGRID_FULL_ROUTES
    how = ("dualmpi's route for every ordered pair of nodes" if full else
           f"one route per link direction (more than {SIMGRID_FULL_ROUTES} nodes): SimGrid "
           "computes shortest paths")
    out = [
        "<?xml version='1.0'?>",
        '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">',
        f"<!-- {_comment(topo.spec)}: {p} nodes, degree {topo.degree}; "
        f"{_comment(topo.reference)}. Routes: {how}. "
        f"Written by dualmpi {__version__} export. -->",
        '<platform version="4.1">',
        f"  <zone id={quoteattr(topo.spec)} routing=\"{'Full' if full else 'DijkstraCache'}\">",
    ]
    for u in range(p):
        out.append(f'    <host id="n{u}" speed={quoteattr(speed)}>')
        out.append(f'      <prop id="address" value={quoteattr(topo.format_node(u))}/>')
        out.append("    </host>")
    for u, v, i in edges(topo):
        out.append(f'    <link id="l{u}-{v}" bandwidth={quoteattr(bandwidth)} '
                   f'latency={quoteattr(latency)} sharing_policy="SPLITDUPLEX">')
        out.append(f'      <prop id="dimension" value="{i}"/>')
        out.append("    </link>")
    if full:
        for src in range(p):
            for dst in range(p):
                if src != dst:
                    out.extend(_simgrid_route(src, dst, topo.route(src, dst)))
    else:
        for u, v, _ in edges(topo):
            out.extend(_simgrid_route(u, v, [u, v]))
            out.extend(_simgrid_route(v, u, [v, u]))
    out.append("  </zone>")
    out.append("</platform>")
    return "\n".join(out) + "\n"


def _comment(text):
    """Return ``text`` safe inside an XML comment."""
    return str(text).replace("--", "- -")


def _simgrid_route(src, dst, path):
    """Return the lines of one ``<route>`` along ``path`` (a list of nodes ``src .. dst``)."""
    lines = [f'    <route src="n{src}" dst="n{dst}" symmetrical="NO">']
    for a, b in zip(path, path[1:]):
        lo, hi = min(a, b), max(a, b)
        lines.append(f'      <link_ctn id="l{lo}-{hi}" direction="{"UP" if a < b else "DOWN"}"/>')
    lines.append("    </route>")
    return lines


def booksim_anynet(topo):
    """Return a BookSim 2 ``anynet`` network file for ``topo``.

    Parameters
    ----------
    topo : Topology
        The network (at most :data:`EXPORT_LIMIT` nodes).

    Returns
    -------
    str
        One line per node ``u``: ``router u node u router v1 router v2 ...`` (router ``u`` with
        terminal ``u`` and the routers of ``u``'s neighbours in dimension order). Every link
        appears on both ends' lines; BookSim keeps one channel per direction. The format has
        no comments, so the file holds nothing else.

    References
    ----------
    BookSim 2, ``src/examples/anynet`` (``topology = anynet; network_file = FILE;
    routing_function = min;``).

    Examples
    --------
    >>> from dualmpi.topology import from_spec
    >>> print(booksim_anynet(from_spec("hypercube:n=2")), end="")
    router 0 node 0 router 1 router 2
    router 1 node 1 router 0 router 3
    router 2 node 2 router 3 router 0
    router 3 node 3 router 2 router 1
    """
    _check_size(topo)
    lines = []
    for u in range(topo.num_nodes):
        routers = " ".join(f"router {v}" for v in topo.neighbors(u))
        lines.append(f"router {u} node {u} {routers}".rstrip())
    return "\n".join(lines) + "\n"


#: Export formats by CLI name: (writer, short description).
FORMATS = {
    "networkx": (networkx_json, "networkx node-link JSON (json_graph.node_link_graph)"),
    "graphml": (graphml, "GraphML (networkx.read_graphml, Gephi, igraph)"),
    "simgrid": (simgrid_platform, "SimGrid platform XML, version 4.1"),
    "booksim": (booksim_anynet, "BookSim 2 anynet network file"),
}


def export(topo, fmt, **options):
    """Return the text of ``topo`` in format ``fmt`` (a key of :data:`FORMATS`).

    ``options`` go to the writer (``bandwidth``, ``latency``, ``speed`` for ``simgrid``).

    Examples
    --------
    >>> from dualmpi.topology import from_spec
    >>> export(from_spec("hypercube:n=1"), "booksim")
    'router 0 node 0 router 1\\nrouter 1 node 1 router 0\\n'
    """
    if fmt not in FORMATS:
        raise DualmpiError(f"unknown export format {fmt!r} (known: {', '.join(FORMATS)})")
    return FORMATS[fmt][0](topo, **options)
