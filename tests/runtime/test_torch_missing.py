"""Without PyTorch the runtime helper says how to install it (no ImportError traceback)."""

import sys

import pytest
from helpers import uniform

from zbsolve.baselines import run_baseline
from zbsolve.errors import UsageError
from zbsolve.runtime.torch_pipeline import pipeline_runtime


def test_missing_torch_is_a_usage_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.distributed.pipelining.schedules", None)  # import fails
    with pytest.raises(UsageError, match=r"zbsolve\[torch\]"):
        pipeline_runtime(run_baseline("1f1b", uniform(2, 2)), [object()], 2)
