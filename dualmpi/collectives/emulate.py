"""A collective of one network run on another through an embedding: every guest link a host path."""

from ..errors import DualmpiError
from .schedule import Round, Schedule, Transfer

__all__ = ["emulate_on", "emulation_summary"]


def emulate_on(schedule, host, embedding):
    """Return ``schedule`` translated onto ``host``: each transfer forwarded along its host path.

    A transfer ``u -> v`` of the guest schedule becomes one routed message over the
    links of ``embedding.path(u, v)``: its ``h``-th link is a :class:`Transfer` in
    the ``h``-th host round of that guest round, with header ``(u, v, tag)`` (``tag``
    numbers the guest transfers, so headers are unique), and the intermediate nodes
    forward the blocks.  A guest round of largest dilation ``D`` takes ``D`` host
    rounds; the hop index restarts with every guest round, so a guest message routed
    over several guest links is store-and-forwarded at the guest's nodes.  Transfers
    that were single links and stay single links keep no header.

    The schedule's router answers with the embedding's path, so the executors check
    every forwarding decision.  Node ids are kept, which the executors need to verify
    the data: ``embedding.node`` must be the identity.

    Parameters
    ----------
    schedule : Schedule
        A schedule on the guest network (``embedding.guest``).
    host : Topology
        The network the schedule runs on.
    embedding : object
        With ``guest``, ``node(u)``, ``path(u, v)`` (host nodes ``[u, ..., v]``) and
        ``next_hop(current, u, v)``.

    Returns
    -------
    Schedule
        The same collective, steps and root on ``host``.

    Raises
    ------
    DualmpiError
        When a reduction transfer would pass intermediate nodes (they would overwrite
        their own partial sums), or the embedding renumbers nodes.

    References
    ----------
    M. A. Sideras, thesis, Section 2.2.1 (emulating hypercube algorithms on the RH).

    Examples
    --------
    >>> from dualmpi.collectives import build_schedule
    >>> from dualmpi.topology import Hypercube, ReducedHypercube
    >>> from dualmpi.topology.hypercube_emulation import HypercubeOnRH
    >>> rh = ReducedHypercube(2, 1)
    >>> s = emulate_on(build_schedule("allgather", Hypercube(4)), rh, HypercubeOnRH(rh))
    >>> s.steps, s.num_rounds, s.num_messages
    (4, 8, 96)
    """
    guest = embedding.guest
    if guest.num_nodes != host.num_nodes or any(embedding.node(u) != u for u in range(host.num_nodes)):
        raise DualmpiError("the emulation must keep node ids (the executors verify blocks by id)")
    rounds, tag = [], 0
    for rnd in schedule.rounds:
        legs = []
        for tr in rnd.transfers:
            path = embedding.path(tr.src, tr.dst)
            if tr.reduce and len(path) > 2:
                raise DualmpiError(f"{schedule.collective}: the reduction {tr.src}->{tr.dst} would be "
                                   f"forwarded over {len(path) - 1} links of {host.spec}; "
                                   "intermediate nodes would overwrite their own partial sums")
            header = (tr.src, tr.dst, tag) if tr.header is not None or len(path) > 2 else None
            legs.append((tr, path, header))
            tag += 1
        depth = max((len(path) - 1 for _, path, _ in legs), default=0)
        sub = [Round(rnd.step, h) for h in range(depth)]
        for tr, path, header in legs:
            for h, (a, b) in enumerate(zip(path, path[1:])):
                sub[h].transfers.append(Transfer(a, b, tr.blocks, header, tr.reduce))
        rounds += sub

    def router(current, u, v, *rest):
        """Return the next node of the host path of guest link ``(u, v)``."""
        return embedding.next_hop(current, u, v)

    algorithm = f"{schedule.algorithm} on {guest.spec}, emulated"
    return Schedule(schedule.collective, algorithm, host, schedule.root, rounds, schedule.steps,
                    router)


def emulation_summary(guest_schedule, host_schedule):
    """Return the rounds and link transfers of a schedule and of its emulation, side by side."""
    return {
        "steps": guest_schedule.steps,
        "guest_rounds": guest_schedule.num_rounds,
        "host_rounds": host_schedule.num_rounds,
        "guest_transfers": guest_schedule.num_messages,
        "host_transfers": host_schedule.num_messages,
        "transfer_ratio": (host_schedule.num_messages / guest_schedule.num_messages
                           if guest_schedule.num_messages else None),
    }
