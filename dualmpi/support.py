"""What ``dualmpi.Comm`` does with each method of ``mpi4py.MPI.Intracomm``: one table.

Every public name of :class:`mpi4py.MPI.Intracomm` has a row: ``links`` (its data
travel over the network's links), ``neighbours`` (links to network neighbours only),
``local`` (a query or a local call: no data move between ranks) or ``unsupported``, with
the reason.  ``dualmpi.Comm`` raises :class:`UnsupportedError` naming the call and the
reason for an unsupported one, instead of an ``AttributeError`` without a word
(``hasattr`` still answers False); docs/api.md's method table is :func:`markdown`.
"""

from .errors import DualmpiError

__all__ = ["STATUS", "UnsupportedError", "unsupported", "markdown"]

_COLL = "over links"
_P2P = ("point-to-point to any rank, routed over the links (dualmpi.p2p; docs/p2p.md): "
        "messages between one pair do not overtake")
_P2P_MODES = ("buffered and ready modes, persistent and partitioned requests and Isendrecv are "
              "not carried (use Send, Isend, Sendrecv: a routed message is buffered already)")
_DERIVED = ("a communicator of some of the network's ranks whose messages cross its links, "
            "routed, non-members forwarding; its collectives MPI's algorithms over them "
            "(dualmpi.derived; docs/derived.md)")
_DUP = ("another dualmpi.Comm of the same network and options: its collectives keep the "
        "papers' schedules")
_IDUP = ("a duplicate is made collectively at once (a new network communicator or contexts "
         "agreed by the ranks): use Dup")
_PERSISTENT = ("MPI-4 persistent collectives: not there yet (a plan is persistent already; "
               "its request needs Start)")
_INTER = ("one network is one group of ranks: intercommunicators and dynamic processes have no "
          "links to travel on")
_ULFM = ("process-failure recovery (ULFM) is not emulated; the network's faults are static "
         "(fail_links/fail_nodes)")
_HANDLE = ("the handle of the ranks' communicator would let MPI move data between "
           "non-neighbours directly")
_LOCAL_ATTR = "attributes, info and error handlers of dualmpi.Comm are not kept"

#: ``{method: (status, note)}``; status ``links``, ``neighbours``, ``local`` or ``unsupported``.
STATUS = {}


def _rows(status, note, names):
    for name in names.split():
        STATUS[name] = (status, note)


_rows("links", "a network schedule: docs/algorithms.md",
      "Bcast Scatter Scatterv Gather Gatherv Allgather Allgatherv Alltoall Alltoallv Alltoallw "
      "Reduce Allreduce Reduce_scatter_block Reduce_scatter Scan Exscan Barrier")
_rows("links", "pickled, then the buffer collectives (dualmpi.objects), on arrays the "
      "communicator keeps: a call whose pickles have the sizes of the one before repeats it "
      "from memory ([performance](performance.md), \"The object collectives\")",
      "bcast scatter gather allgather alltoall reduce allreduce scan exscan barrier")
_rows("links", "the blocking collective's plan run as a request (dualmpi.request)",
      "Ibcast Iscatter Iscatterv Igather Igatherv Iallgather Iallgatherv Ialltoall Ialltoallv "
      "Ialltoallw Ireduce Iallreduce Ireduce_scatter_block Ireduce_scatter Iscan Iexscan "
      "Ibarrier")
_rows("links", _P2P,
      "Send Recv Isend Irecv Ssend Issend Sendrecv Sendrecv_replace Probe Iprobe Mprobe Improbe "
      "send recv isend irecv ssend issend sendrecv probe iprobe mprobe improbe")
_rows("local", "no data move", "Get_rank Get_size rank size Get_group group Is_inter Is_intra "
      "is_inter is_intra is_topo Get_topology Get_name Set_name name Get_attr Get_info Abort "
      "Free free")
_rows("unsupported", _P2P_MODES,
      "Bsend Rsend Ibsend Irsend Send_init Ssend_init Bsend_init Rsend_init Recv_init "
      "Psend_init Precv_init Isendrecv Isendrecv_replace Attach_buffer Detach_buffer "
      "Flush_buffer Iflush_buffer bsend ibsend")
_rows("links", _DUP, "Dup Dup_with_info Clone")
_rows("links", _DERIVED,
      "Split Split_type Create Create_group Create_cart Create_graph Create_dist_graph "
      "Create_dist_graph_adjacent")
_rows("local", "MPI's answer (no reordering: a rank stays where its nodes are)",
      "Cart_map Graph_map")
_rows("local", "MPI's comparison of the groups (two communicators are at most CONGRUENT)",
      "Compare")
_rows("unsupported", _IDUP, "Idup Idup_with_info")
_rows("unsupported", "communicators from a group without a parent need MPI sessions, which "
      "have no network", "Create_from_group")
_rows("unsupported", _PERSISTENT,
      "Bcast_init Scatter_init Scatterv_init Gather_init Gatherv_init Allgather_init "
      "Allgatherv_init Alltoall_init Alltoallv_init Alltoallw_init Reduce_init Allreduce_init "
      "Reduce_scatter_block_init Reduce_scatter_init Scan_init Exscan_init Barrier_init")
_rows("unsupported", _INTER, "Accept Connect Disconnect Join Spawn Spawn_multiple Get_parent "
      "Create_intercomm")
_rows("unsupported", _ULFM, "Ack_failed Agree Iagree Get_failed Revoke Is_revoked Shrink "
      "Ishrink")
_rows("unsupported", _HANDLE, "f2py py2f fromhandle fromint toint handle")
_rows("unsupported", _LOCAL_ATTR, "Set_attr Delete_attr Create_keyval Free_keyval Set_info "
      "Get_errhandler Set_errhandler Create_errhandler Call_errhandler")
_rows("local", "the network's own topology object, not MPI's topology kind (use Get_topology)",
      "topology")
_rows("local", "the info hints of the ranks' communicator", "info")


class UnsupportedError(DualmpiError, AttributeError):
    """A method of ``MPI.Intracomm`` that ``dualmpi.Comm`` does not carry (and why)."""


def unsupported(name, owner="dualmpi.Comm"):
    """Return the :class:`UnsupportedError` for ``<owner>.<name>``, or None.

    >>> str(unsupported("Spawn")).split(":")[0]
    'dualmpi.Comm.Spawn is not supported'
    >>> unsupported("Bcast") is None
    True
    """
    status, note = STATUS.get(name, (None, None))
    if status != "unsupported":
        return None
    return UnsupportedError(f"{owner}.{name} is not supported: {note}")


def markdown():
    """Return docs/api.md's table of every ``MPI.Intracomm`` method, grouped by status."""
    order = ("links", "neighbours", "local", "unsupported")
    words = {"links": "over links", "neighbours": "over links, neighbours only",
             "local": "local only", "unsupported": "not supported"}
    rows = ["| status | methods | how / why |", "|---|---|---|"]
    for status in order:
        groups = {}
        for name, (st, note) in STATUS.items():
            if st == status:
                groups.setdefault(note, []).append(name)
        for note, names in groups.items():
            rows.append(f"| {words[status]} | {', '.join(f'`{n}`' for n in names)} | {note} |")
    return "\n".join(rows)
