"""A master/worker task farm: an ordinary mpi4py program (no dualmpi in it).

Rank 0 hands out tasks -- count the primes in one range of integers -- to whichever worker asks
first: it receives from ``MPI.ANY_SOURCE`` with ``MPI.ANY_TAG``, reads the sender and the kind
of message from the ``MPI.Status``, and answers that worker with the next task or with a stop.
The workers ask with their last result.  Which worker gets which task depends on timing; the
line rank 0 prints at the end does not.

Run it as it is, or on an emulated network (the workers' messages to rank 0 are routed over the
links, forwarded by the ranks in between)::

    mpiexec -n 8 python -m mpi4py examples/taskfarm.py [TASKS] [WIDTH]
    mpiexec -n 8 python -m mpi4py -m dualmpi exec dualcube:r=2 -- examples/taskfarm.py
"""
import sys

from mpi4py import MPI

ASK, WORK, STOP = 1, 2, 3


def primes_in(lo, hi):
    """Count the primes p with lo <= p < hi (trial division: a task that takes some time)."""
    count = 0
    for k in range(max(lo, 2), hi):
        if all(k % d for d in range(2, int(k ** 0.5) + 1)):
            count += 1
    return count


def master(comm, tasks, width):
    results, todo, stopped = {}, list(range(tasks)), 0
    status = MPI.Status()
    while stopped < comm.Get_size() - 1:
        done = comm.recv(source=MPI.ANY_SOURCE, tag=ASK, status=status)
        worker = status.Get_source()
        if done is not None:
            task, count = done
            results[task] = count
        if todo:
            task = todo.pop(0)
            comm.send((task, task * width, (task + 1) * width), dest=worker, tag=WORK)
        else:
            comm.send(None, dest=worker, tag=STOP)
            stopped += 1
    return results


def worker(comm):
    status = MPI.Status()
    comm.send(None, dest=0, tag=ASK)
    while True:
        job = comm.recv(source=0, tag=MPI.ANY_TAG, status=status)
        if status.Get_tag() == STOP:
            return
        task, lo, hi = job
        comm.send((task, primes_in(lo, hi)), dest=0, tag=ASK)


def main(tasks=40, width=500):
    comm = MPI.COMM_WORLD
    if comm.Get_size() == 1:
        results = {t: primes_in(t * width, (t + 1) * width) for t in range(tasks)}
    elif comm.Get_rank() == 0:
        results = master(comm, tasks, width)
    else:
        worker(comm)
        return
    total = sum(results.values())
    print(f"taskfarm: {tasks} tasks on {max(comm.Get_size() - 1, 1)} workers, every task done "
          f"once: {sorted(results) == list(range(tasks))}; primes below {tasks * width}: {total}; "
          f"per task: {[results[t] for t in range(tasks)]}")


if __name__ == "__main__":
    main(*[int(a) for a in sys.argv[1:3]])
