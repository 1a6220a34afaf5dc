"""All-to-one personalized communication (gather): the scatter tree run backwards (pure).

In the scatter (:mod:`dualmpi.collectives.scatter`) the tree edge ``parent -> child``
carries the root's blocks for every node of the child's subtree, in the round the
child first hears from its parent.  Run backwards — the last round first, every edge
turned round — the same tree gathers: the child sends its parent the blocks of its
whole subtree, after every node below it has sent it theirs.  Each block ``(root, x)``
of the scatter becomes ``(x, root)``: node ``x``'s piece for the root.  The step count
and the words each edge carries are the scatter's: ``2r`` steps on the dual-cube D_r
(``n`` on Q_n), and the root receives ``p - 1`` blocks.

``MPI_Gatherv`` runs the same schedule with a size per source rank
(:class:`dualmpi.engine.layout.Layout`).

References
----------
Y. Li, S. Peng, W. Chu, "Efficient collective communications in dual-cube", J.
Supercomputing 28 (2004), Section 4 (scatter; gather is its reverse).
"""

from ..topology import HDN
from . import scatter
from .registry import Collective
from .schedule import Round, Schedule, Transfer

__all__ = ["COLLECTIVES", "build", "reverse_personalized"]


def reverse_personalized(forward, collective="gather"):
    """Return ``forward`` (a scatter) run backwards: every block ``(root, x)`` sent from ``x``.

    Forward round ``t`` of ``T`` becomes round ``T - 1 - t``; a transfer ``u -> v`` of
    blocks ``(o, t)`` becomes ``v -> u`` of blocks ``(t, o)``.

    >>> from dualmpi.topology import Hypercube
    >>> s = reverse_personalized(scatter.build(Hypercube(2), 0))
    >>> [(tr.src, tr.dst, tr.blocks) for r in s.rounds for tr in r.transfers]
    [(2, 0, ((2, 0),)), (3, 1, ((3, 0),)), (1, 0, ((1, 0), (3, 0)))]
    """
    rounds = []
    for step, rnd in enumerate(reversed(forward.rounds)):
        back = Round(step=step, hop=0)
        for tr in rnd.transfers:
            back.transfers.append(Transfer(tr.dst, tr.src, tuple((t, o) for o, t in tr.blocks)))
        rounds.append(back)
    root = forward.root
    initial = {u: [(u, root)] for u in range(forward.topo.num_nodes)}
    return Schedule(collective, f"reversed {forward.algorithm}", forward.topo, root, rounds,
                    forward.steps, initial=initial)


def build(topo, root=0):
    """Return the gather to ``root``: the scatter from ``root`` reversed.

    Examples
    --------
    >>> from dualmpi.topology import DualCube
    >>> s = build(DualCube(2), 3)
    >>> s.collective, s.steps, s.num_messages, sorted(b for r in s.rounds
    ...     for tr in r.transfers if tr.dst == 3 for b in tr.blocks)[:3]
    ('gather', 4, 7, [(0, 3), (1, 3), (2, 3)])
    """
    return reverse_personalized(scatter.build(topo, root))


def _build(topo, root, variant, q, algorithm):
    return build(topo, root)


#: ``MPI_Gather`` and ``MPI_Gatherv`` (the same tree, a size per source rank).
COLLECTIVES = (
    Collective("gather", "Gather", "gather", _build, rooted=True, paper_steps=scatter.paper_steps,
               networks=(HDN,),
               initial=lambda topo, root, u: [(u, root)],
               expected=lambda topo, root, u: [(s, root) for s in range(topo.num_nodes)]
               if u == root else []),
    Collective("gatherv", "Gatherv", "gather", schedule="gather", rooted=True, counts="rank",
               paper_steps=scatter.paper_steps),
)
