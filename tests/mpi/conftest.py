"""MPI tier: every case below 8 ranks; at 8 every pair of values; from 32 each value; 64 samples.

Below 8 ranks every case of a parametrized test runs.  At 8 ranks (4 a core on the 2-core
machines) a case runs only when it brings a pair of parameter values (a dtype with a network,
a collective with a size, ...) that no earlier case of the test ran with
(:data:`EVERY_PAIR_FROM`, "every pair": all-pairs testing); at 32 ranks and more (16 or 32 a
core) only when it brings a value of one of its parameters that no earlier case ran with
(:data:`EACH_CHOICE_FROM`, "each choice").  Every value still runs at every rank count, every
pair of values at 8 ranks, every combination at 1 and 2 ranks (and 4) and with ``--slow``.  A
case that skips (no such network at this rank count) covers nothing, so the next case with its
values runs; the sweeps named in :data:`ONE_CASE_TESTS` run one case from 32 ranks on.
(``tests/test_mpi_sampling.py`` checks these rules on made-up cases, without MPI.)  At 64 ranks every collective call of the per-collective sweeps costs seconds; the
modules below check the same code at 1–32 ranks, and the 64-rank default pass keeps the
older modules' samples (test_api_mpi and the rest) and the tests of :data:`SAMPLED` modules
named there, one case of each (:data:`ONE_CASE_FROM`).  ``launch/test --slow`` runs everything.
"""

import itertools

import pytest

#: Modules whose tests are marked slow from :data:`HEAVY_FROM` ranks on.
SWEEPS = ("test_coll_", "test_icollectives_mpi", "test_neighbor_mpi", "test_objects_mpi",
          "test_msgbuffer_mpi", "test_nonblocking_mpi", "test_redteam_mpi", "test_comm_setup_mpi",
          "test_speculative_mpi", "test_leases_mpi", "test_once_mpi")

#: Modules of which only the tests named here stay in the default pass from :data:`HEAVY_FROM`
#: ranks on; their other tests are marked slow there.  test_derived_mpi's ~80 tests on its
#: 64-node network take ~150 s of the 64-rank pass (MPIEXEC_TIMEOUT 600 s on 2 cores).
SAMPLED = {
    "test_derived_mpi": ("test_routed_send_recv_inside_a_part",
                         "test_without_a_progress_thread_parts_still_work"),
    # (56 and 43 s of the 64-rank pass; every test runs at 1-32 ranks: at 64 a repeated loop's
    # disagreement, a correct program left alone, and each reduction against MPI's)
    "test_agreement_mpi": ("test_a_rank_that_skips_a_call_of_a_loop",
                           "test_correct_programs_are_not_disturbed"),
    "test_reductions_mpi": ("test_reductions_match_mpi", "test_every_allreduce_algorithm"),
}

#: Rank count from which :data:`SWEEPS` run only with ``-m slow`` (``launch/test --slow``).
HEAVY_FROM = 64

#: Rank count from which a parametrized test runs only the cases that bring a parameter value
#: none of its earlier cases ran with (the others skip), when the tests marked slow are left
#: out (``-m "... not slow"``, as ``launch/test`` does without ``--slow``).
#: (Issue 25: CI took 24-27 minutes.)  Measured alone on 2 cores: the 32-rank tier's pytest from
#: 1086 cases in 4:52 to 748 in 3:58; the 64-rank tier's to 102 cases in 2:48 (5:00-5:49 with
#: 118-159 cases in the last CI runs), 2:38 once the sweeps were not collected there either.
EACH_CHOICE_FROM = 32

#: Rank count from which a parametrized test runs only the cases that bring a pair of parameter
#: values none of its earlier cases ran with (below :data:`EACH_CHOICE_FROM`), when the tests
#: marked slow are left out.  (Issue 25: CI took 19:39 and 20:37 with every case at 8 ranks.)
#: Measured from a run's ``--durations=0`` at 8 ranks: 860 of 3555 cases skipped, 16 % of the
#: tier's test time (the blocking calls beside a request in flight, 396 cases, and each
#: reduction against MPI's, 272, the most); the 2-rank tier runs every case in half a minute.
EVERY_PAIR_FROM = 8

#: Rank count from which a parametrized test runs only its first case that runs (the others
#: skip), when the tests marked slow are left out: the values of its parameters all ran at 32
#: ranks (each choice).  (Issue 25: CI took 24:31 on this machine; the 64-rank tier's pytest
#: from 236 s of calls to 162 s by this alone, measured with --durations=0.)
ONE_CASE_FROM = 64

#: Tests (node ids up to their parameters) that run only their first case from
#: :data:`EACH_CHOICE_FROM` ranks on, as every test does from :data:`ONE_CASE_FROM`: sweeps over
#: many values (collectives, buffer cases, bad calls, dtypes) whose every pair of values runs at
#: 8 ranks and every case at 1-4.  (Issue 25: CI took 19:43 with the 32-rank tier at 6:46 under
#: others' load, 5:40 an hour before; these took 68 s of a 5:50 tier, measured with
#: --durations=0, 1-12 s each.)
ONE_CASE_TESTS = (
    "tests/mpi/test_derived_mpi.py::test_collective_on_a_part_equals_mpi",
    "tests/mpi/test_reductions_mpi.py::test_small_integers_combine_in_one_c_call",
    "tests/mpi/test_speculative_mpi.py::test_speculative_repeats_match_mpi",
    "tests/mpi/test_speculative_mpi.py::test_calls_that_alternate_are_repeated_from_memory",
    "tests/mpi/test_speculative_mpi.py::test_counts_that_change_every_call_stop_the_speculation",
    "tests/mpi/test_repeats_by_shape_mpi.py::test_nonblocking_calls_on_new_arrays_of_one_shape_equal_mpi",
    "tests/mpi/test_repeats_by_shape_mpi.py::test_calls_on_new_arrays_of_one_shape_equal_mpi",
    "tests/mpi/test_msgbuffer_mpi.py::test_bottom_alltoallw_derived_datatypes",
    "tests/mpi/test_coll_scan_mpi.py::test_scan_bad_calls",
    "tests/mpi/test_coll_reduce_scatter_mpi.py::test_reduce_scatter_bad_calls",
    "tests/mpi/test_coll_alltoall_mpi.py::test_alltoall_bad_calls",
    "tests/mpi/test_coll_reduce_mpi.py::test_reduce_bad_calls",
    # (engine-local bookkeeping, the same at every rank count: 13 s of the 32-rank tier, and
    # the objects' repeats, 9 functions on three communicators)
    "tests/mpi/test_leases_mpi.py::test_a_remembered_call_outlives_plans_it_does_not_run",
    "tests/mpi/test_leases_mpi.py::test_calls_alternating_with_a_full_cache_settle",
    "tests/mpi/test_leases_mpi.py::test_a_call_whose_plan_was_dropped_is_read_afresh",
    "tests/mpi/test_objects_mpi.py::test_repeated_calls_match_mpi",
    "tests/mpi/test_objects_mpi.py::test_repeats_run_from_memory",
    # (a plan run once: every collective of new sizes, 55 s of the 32-rank tier in all its
    # cases, 2.5 min of the 64-rank one; the same code at every rank count)
    "tests/mpi/test_once_mpi.py::test_new_count_tables_run_without_a_runner",
    "tests/mpi/test_once_mpi.py::test_calls_run_once_meet_calls_run_on_runners",
    "tests/mpi/test_once_mpi.py::test_calls_run_once_count_as_a_runners",
    "tests/mpi/test_once_mpi.py::test_calls_past_the_scratch_limit_make_their_runners",
    "tests/mpi/test_once_mpi.py::test_a_message_of_another_call_stops_a_call_run_once",
)

#: Tests (node id prefixes) that run only with ``-m slow`` from the given rank count on (CI keeps
#: the whole run under 20 minutes on 2 cores; ``launch/test --durations`` shows the slowest):
#: the total exchange under link faults (37 s at 32 ranks, 12 s each at 64) and pipelined (28 s
#: each at 64), the CG application's command (25 s at 32), 200 routed messages in flight to the
#: farthest rank (over 50 s at 32: every send and post waits on a hub's lock while 32 progress
#: threads share 2 cores), a 1-MiB message forwarded by ranks that compute for 2 s, due within
#: 1.5 s (0.02-0.17 s when run alone at 32 ranks, 4.8 s once in a CI run at load 90), the
#: zero-copy checks of repeated reductions and of new buffers (8, 7 and 6 s at 32) and the
#: pipelined total exchange (5 s each at 32, 28 s at 64), CG against native (6 s), the lane's
#: largest size (5 s; 13 s at 64), Free with messages in flight on the second network (5 s),
#: at 64 the
#: repeated calls on one communicator (18 s) and its options with checksums (12 s), the routed
#: messages' larger sizes (11 and 9 s), the verified total exchange of 64 KiB and 0 B (12 and
#: 8 s; 1 B stays), the ring's 4096-element allreduce (11 s), a remembered call's rechecks
#: (9 s), Free with messages in flight (8 s) and the first network's allreduce algorithms (5 s);
#: and (measured at 64 with --durations=0: 262 s for the 157 tests left before) the ring's
#: 1-element allreduce (9.5 s; its allgather stays), Free forwarding without a progress thread
#: (8.5 s), the in-place int16 total exchange and one of two alltoallv buffer specs (5.7 and
#: 4.4 s), and the refused broadcast too large for memory (4.2 s; the refused allreduce stays).
#: Then (issue 25: CI took 24 minutes; a CI run's --durations, and --durations=0 at 64) at 32
#: the 64-KiB verified total exchange (9 s), the large repeated v-calls' zero-copy check (8 s),
#: the third network's allreduce algorithms (8 s), the repeated calls on one communicator (5 s),
#: communicators made again (5 s) and SUMMA's command (5 s); at 64 the 64-KiB verified
#: all-gather (12 s), the float64 Alltoall and Allgather against MPI (11 and 6 s; their other
#: buffers stay), a routed send inside a part (odd-even, 6 s; halves stays), the lane's 0-byte
#: uint8 case (6 s), the float64 Allreduce (6 s; eleven other reductions stay), the refused
#: Allreduce on every rank (4 s) and the 4096-element HDN broadcast and scatter (4 s each; 0
#: stays); and test_agreement_mpi and test_reductions_mpi are sampled there (:data:`SAMPLED`).
#: (A 32-rank entry applies at 64 too.)
#: They run at the smaller rank counts, and the larger passes keep the total exchange's and the
#: applications' other tests.
HEAVY_TESTS = {
    32: ("tests/mpi/test_emulation.py::test_collectives_survive_link_faults[alltoall",
         "tests/mpi/test_apps_mpi.py::test_app_command_verifies_and_writes_json[cg]",
         "tests/mpi/test_p2p_routed_mpi.py::test_no_overtaking_with_many_messages_in_flight",
         "tests/mpi/test_p2p_routed_mpi.py::test_a_computing_rank_on_the_route_forwards",
         "tests/mpi/test_coll_reduce_mpi.py::test_repeated_reductions_run_zero_copy",
         "tests/mpi/test_coll_alltoall_mpi.py::test_first_calls_of_new_buffers_run_zero_copy",
         "tests/mpi/test_emulation.py::test_pipelined_and_whole_blocks[alltoall",
         "tests/mpi/test_apps_mpi.py::test_cg_converges_like_native",
         "tests/mpi/test_p2p_lane_mpi.py::test_lane_equals_python_path_and_mpi[70000-",
         "tests/mpi/test_p2p_routed_mpi.py::test_free_waits_for_messages_in_flight[net1]",
         # the remembered calls' alternations and buffer specs (13-17 s at 32 ranks, 8-17 s
         # at 64): what they check is the same at 8
         "tests/mpi/test_api_mpi.py::test_a_new_receive_buffer_beside_the_same_send_buffer",
         "tests/mpi/test_api_mpi.py::test_calls_alternating_between_buffers_are_remembered",
         "tests/mpi/test_api_mpi.py::test_buffer_specs_made_anew_for_every_call_are_remembered",
         "tests/mpi/test_emulation.py::test_collective_verified[65536-alltoall]",
         "tests/mpi/test_coll_alltoall_mpi.py::test_large_v_calls_repeated_run_zero_copy",
         "tests/mpi/test_reductions_mpi.py::test_every_allreduce_algorithm[2]",
         "tests/mpi/test_api_mpi.py::test_repeated_calls_on_the_same_buffers[one0]",
         "tests/mpi/test_comm_setup_mpi.py::test_communicators_made_again_start_no_thread",
         "tests/mpi/test_apps_mpi.py::test_app_command_verifies_and_writes_json[summa]",
         # (CI at 20:27 with each choice) the zero-copy v-variant repeats on D_3 (10 s) and the
         # nonblocking repeats of 5000-element blocks (6 s): their smaller cases stay
         "tests/mpi/test_speculative_mpi.py::test_large_speculative_repeats_run_zero_copy",
         "tests/mpi/test_icollectives_mpi.py::test_repeats_start_in_c_and_match_mpi[0-5000]",
         # (CI at 20:37) the ring allreduce (7-9 s for 1 element: 62 rounds on each of two
         # networks, 16 ranks a core); every ring case runs at 8, the ring allgather at 32
         "tests/mpi/test_ring_mpi.py::test_ring_collective_verified[1-ring-allreduce]",
         "tests/mpi/test_ring_mpi.py::test_ring_collective_verified[4096-ring-allreduce]"),
    64: ("tests/mpi/test_api_mpi.py::test_repeated_calls_on_the_same_buffers[one0]",
         # (28 s at 64: six collectives three times on 32-KiB pieces; the same run at 32)
         "tests/mpi/test_apart_mpi.py::test_large_payloads_travel_apart_and_match_mpi",
         "tests/mpi/test_api_mpi.py::test_options_keep_results[one0-verify]",
         "tests/mpi/test_emulation.py::test_collective_verified[65536-alltoall]",
         "tests/mpi/test_emulation.py::test_collective_verified[0-alltoall]",
         "tests/mpi/test_p2p_routed_mpi.py::test_free_waits_for_messages_in_flight[net0]",
         "tests/mpi/test_reductions_mpi.py::test_every_allreduce_algorithm[0]",
         "tests/mpi/test_ring_mpi.py::test_ring_collective_verified[4096-",
         "tests/mpi/test_p2p_routed_mpi.py::test_every_pair_gets_its_bytes_over_the_route[net0-70000]",
         "tests/mpi/test_p2p_routed_mpi.py::test_every_pair_gets_its_bytes_over_the_route[net0-1000]",
         "tests/mpi/test_api_mpi.py::test_a_remembered_call_rechecks_changed_arrays",
         "tests/mpi/test_api_mpi.py::test_calls_on_new_buffers_do_not_keep_them_alive",
         "tests/mpi/test_ring_mpi.py::test_ring_collective_verified[1-ring-allreduce]",
         "tests/mpi/test_p2p_routed_mpi.py::test_without_a_progress_thread_free_still_forwards",
         "tests/mpi/test_api_mpi.py::test_alltoall_matches_mpi[one0-int16-in-place]",
         "tests/mpi/test_api_mpi.py::test_alltoallv_matches_mpi[one0-int16-packed-mpi4py-spec]",
         "tests/mpi/test_api_mpi.py::test_a_call_that_would_not_fit_in_memory_is_refused_everywhere[Bcast-every rank]",
         # (3 s at 64: new count tables of 64 x 64 blocks; the same checks run at 32)
         "tests/mpi/test_api_mpi.py::test_a_count_table_that_surely_fits_skips_the_memory_reduction",
         "tests/mpi/test_emulation.py::test_collective_verified[65536-allgather]",
         "tests/mpi/test_api_mpi.py::test_alltoall_matches_mpi[one0-float64-buffers]",
         "tests/mpi/test_api_mpi.py::test_allgather_matches_mpi[one0-float64-buffers]",
         "tests/mpi/test_derived_mpi.py::test_routed_send_recv_inside_a_part[net0-odd-even]",
         "tests/mpi/test_p2p_lane_mpi.py::test_lane_equals_python_path_and_mpi[0-uint8]",
         "tests/mpi/test_reductions_mpi.py::test_reductions_match_mpi[0-Allreduce-SUM-float64]",
         "tests/mpi/test_api_mpi.py::test_a_call_that_would_not_fit_in_memory_is_refused_everywhere[Allreduce-every",
         "tests/mpi/test_hdn_mpi.py::test_hdn_broadcast_on_ranks[4096-",
         # (CI at 20:27 with each choice) every pair's 1-byte routed message (14 s; the other
         # routed tests stay) and a part's messages without a progress thread (9 s)
         "tests/mpi/test_p2p_routed_mpi.py::test_every_pair_gets_its_bytes_over_the_route[net0-1]",
         "tests/mpi/test_derived_mpi.py::test_without_a_progress_thread_parts_still_work",
         # (CI at 24:31, --durations=0 at 64, one case each) the nonblocking payloads apart
         # (11 s; the blocking ones are off at 64 too) and the in-place and derived-datatype
         # ones, the nonblocking calls on new arrays of
         # one shape (10 s; the blocking ones stay), the hypercube's collectives emulated on
         # RH (8 s), a truncation through the lane (7 s; the lane against MPI stays) and the
         # pipelined blocks (7 s; the verified total exchange stays): each runs at 1-32
         "tests/mpi/test_apart_mpi.py::test_large_nonblocking_payloads_travel_apart_and_match_mpi",
         "tests/mpi/test_apart_mpi.py::test_large_in_place_and_derived_datatype_payloads_apart",
         "tests/mpi/test_repeats_by_shape_mpi.py::test_nonblocking_calls_on_new_arrays_of_one_shape_equal_mpi",
         "tests/mpi/test_ring_mpi.py::test_hypercube_collectives_emulated_on_rh",
         "tests/mpi/test_p2p_lane_mpi.py::test_truncation_through_the_lane",
         "tests/mpi/test_emulation.py::test_pipelined_and_whole_blocks"),
}


def _size():
    """The job's rank count (0 without mpi4py)."""
    try:
        from mpi4py import MPI
    except ImportError:  # pragma: no cover - the MPI tier needs mpi4py
        return 0
    return MPI.COMM_WORLD.Get_size()


def _sampling(config):
    """True when the tests marked slow are left out (``launch/test`` without ``--slow``)."""
    return "not slow" in (config.getoption("-m") or "")


def pytest_ignore_collect(collection_path, config):
    """From :data:`HEAVY_FROM` ranks, without ``--slow``, the :data:`SWEEPS` modules are not even
    collected (all their tests would be marked slow: at 64 ranks, 32 a core, collecting every
    module took 37 s of the tier)."""
    if collection_path.name.startswith(SWEEPS) and _sampling(config) and \
            _size() >= HEAVY_FROM:
        return True
    return None


def pytest_collection_modifyitems(config, items):
    size = _size()
    if not size:
        return
    heavy = tuple(t for n, tests in HEAVY_TESTS.items() if size >= n for t in tests)
    for item in items:
        if heavy and item.nodeid.startswith(heavy):
            item.add_marker(pytest.mark.slow)
    if size >= EVERY_PAIR_FROM and _sampling(config):
        width = 1 if size >= EACH_CHOICE_FROM else 2
        for item in items:
            spec = getattr(item, "callspec", None)
            if spec is not None and spec.params:
                _CHOICES[item.nodeid] = (item.nodeid.split("[", 1)[0],
                                         _units(spec.params, width))
    if size < HEAVY_FROM:
        return
    for item in items:
        module = item.module.__name__
        if module.startswith(SWEEPS) or \
                item.originalname not in SAMPLED.get(module, (item.originalname,)):
            item.add_marker(pytest.mark.slow)


#: nodeid -> (test, the units its case covers: :func:`_units`), from EVERY_PAIR_FROM ranks on
_CHOICES = {}
#: test -> the units of its cases that ran
_RAN = {}


def _units(params, width):
    """The units a case with ``params`` (``{name: value}``) covers: its ``(parameter, value)``
    pairs one by one (``width`` 1), or two by two (``width`` 2; one alone when it has one).

    >>> sorted(_units({"n": 5, "dtype": "int8"}, 1))
    [(('dtype', 'int8'),), (('n', 5),)]
    >>> sorted(_units({"n": 5, "dtype": "int8", "warm": True}, 2))[0]
    (('dtype', 'int8'), ('n', 5))
    >>> len(_units({"n": 5, "dtype": "int8", "warm": True}, 2)), len(_units({"n": 5}, 2))
    (3, 1)
    """
    values = sorted((name, _value(value)) for name, value in params.items())
    if width == 1 or len(values) == 1:
        return frozenset((v,) for v in values)
    return frozenset(itertools.combinations(values, 2))


def _value(value):
    """A parameter's value as a set member: itself, or its ``repr`` when it has no hash."""
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Skip a case whose every unit (a pair of parameter values at 8 ranks, a value from 32 on)
    an earlier case of its test ran with.

    The same on every rank: collection, order and skips (made from the rank count) agree, and a
    case that ran covers its values whatever its outcome.
    """
    choice = _CHOICES.get(item.nodeid)
    if choice is not None and choice[0] in _RAN and (
            _size() >= ONE_CASE_FROM or _size() >= EACH_CHOICE_FROM and
            choice[0] in ONE_CASE_TESTS):
        pytest.skip(f"one case from {ONE_CASE_FROM} ranks (of some sweeps from "
                    f"{EACH_CHOICE_FROM}): an earlier case of this test ran (every pair of "
                    "values of its parameters runs at 8 ranks, every case at 1-4)")
    if choice is not None and choice[1] <= _RAN.get(choice[0], frozenset()):
        if _size() >= EACH_CHOICE_FROM:
            pytest.skip(f"each choice from {EACH_CHOICE_FROM} ranks: every value of its "
                        "parameters ran in an earlier case (every case runs at 1-4 ranks and "
                        "with --slow)")
        pytest.skip(f"every pair from {EVERY_PAIR_FROM} ranks: every pair of values of its "
                    "parameters ran in an earlier case (every case runs at 1-4 ranks and with "
                    "--slow)")


def pytest_runtest_logreport(report):
    choice = _CHOICES.get(report.nodeid)
    if choice is not None and report.when == "call" and not report.skipped:
        _RAN[choice[0]] = _RAN.get(choice[0], frozenset()) | choice[1]


@pytest.fixture
def full_calls(monkeypatch):
    """``{method: calls}`` of this test's ``dualmpi.Comm`` calls that took the full path
    (``dualmpi.calls.collective``: read, agree, plan), not a remembered one."""
    from dualmpi import calls

    full = {}
    real = calls.collective

    def counted(net, method, *args, **kw):
        full[method] = full.get(method, 0) + 1
        return real(net, method, *args, **kw)

    monkeypatch.setattr(calls, "collective", counted)
    return full
