import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# Tests that take the longest (each documented command chain runs its commands one after
# another; the torch and torchtitan tests start processes) run first, so that the two
# workers end together instead of one waiting out a long test collected last.
FIRST = ("test_documented_commands.py", "runtime/test_torch_runtime.py", "runtime/test_torchtitan.py",
         "runtime/test_plan_against_run.py", "sweep/test_sweep_runs.py", "test_code_checks.py")


def pytest_collection_modifyitems(items):
    def rank(item) -> int:
        path = item.nodeid.split("::")[0]
        return next((i for i, name in enumerate(FIRST) if path.endswith(name)), len(FIRST))

    items.sort(key=rank)  # stable: the rest keep their order
