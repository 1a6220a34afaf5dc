"""A line that ends the job (watchdog, router) outlives the MPI_Abort that follows it.

The abort kills the process at once: a line still in a Python buffer, or in the temporary
file where pytest's default ``--capture=fd`` keeps a test's output until the test ends, is
lost -- the 64-rank tier once ended with ``MPI_ABORT ... Errorcode: 3`` and no word of why.
Each case runs a process that writes the line and dies with ``os._exit(3)`` (what
``MPI_Abort`` does to a rank, without MPI), and reads that process's standard error.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LINE = "dualmpi: test: the job ends here"


def _run(args, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def _pytest(tmp_path, body, *options):
    """Run ``body`` as the one test of a pytest session (default capture unless ``options``)."""
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(body))
    return _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", *options, "test_inner.py"],
                tmp_path)


def test_without_pytest_the_line_reaches_stderr(tmp_path):
    proc = _run(["-c", "import os; from dualmpi.engine.watchdog import last_words; "
                       f"last_words({LINE!r}); os._exit(3)"], tmp_path)
    assert proc.returncode == 3
    assert proc.stderr == LINE + "\n"


@pytest.mark.parametrize("capture", ["fd", "sys", "no"])
def test_under_pytests_capture_the_line_reaches_stderr(tmp_path, capture):
    """Whatever pytest captures, the line reaches the session's stderr, once."""
    proc = _pytest(tmp_path, f"""
        import os
        from dualmpi.engine.watchdog import last_words

        def test_abort():
            last_words({LINE!r})
            os._exit(3)
        """, f"--capture={capture}")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.count(LINE) == 1, (proc.stdout, proc.stderr)


def test_inside_capfd_the_line_reaches_stderr(tmp_path):
    """A test's own fd capture on top of the session's: the line still gets out."""
    proc = _pytest(tmp_path, f"""
        import os
        from dualmpi.engine.watchdog import last_words

        def test_abort(capfd):
            last_words({LINE!r})
            os._exit(3)
        """)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.count(LINE) == 1, (proc.stdout, proc.stderr)


def test_the_watchdogs_diagnostic_survives_the_abort_under_pytest(tmp_path):
    """The watchdog's own path: past the deadline its line, then the abort (here os._exit)."""
    proc = _pytest(tmp_path, """
        import os
        import time
        from dualmpi.engine.watchdog import Watchdog

        def test_stuck():
            dog = Watchdog("rank 5", 0.2, os._exit)
            dog.arm(7, [4])
            time.sleep(30)
        """)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "dualmpi: watchdog: rank 5 has waited" in proc.stderr, (proc.stdout, proc.stderr)
    assert "in round 7 for rank 4 to send; aborting the job" in proc.stderr
