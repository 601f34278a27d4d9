"""`zbsolve run` stopped by a signal to its own process: the ranks stop too, exit 130."""

import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("torch")

from helpers import alive, children  # noqa: E402

from zbsolve.cli import main  # noqa: E402

STACK = ["--layers", "2", "--hidden", "64", "--heads", "2", "--seq", "32", "--microbatch-size", "2"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_run_alone_stops_its_ranks_and_exits_130(tmp_path, signum):
    plan = tmp_path / "plan.json"
    assert main(["baseline", "1f1b", "--stages", "2", "--microbatches", "4", "-o", str(plan)]) == 0
    run = subprocess.Popen([sys.executable, "-m", "zbsolve", "run", str(plan), *STACK, "--steps", "100000"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    ranks: list[int] = []
    while len(ranks) < 2 and time.monotonic() < deadline:  # both ranks started (they then run for minutes)
        ranks = [pid for pid, line in children(run.pid) if "spawn_main" in line]
        assert run.poll() is None, run.stderr.read()
        time.sleep(0.05)
    assert len(ranks) == 2
    run.send_signal(signum)  # the parent alone, not its group
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    assert err.rstrip().endswith("zbsolve run: interrupted")
    assert not any(alive(pid) for pid in ranks)
