"""What an offloaded forward saves goes to host and back (zbsolve/runtime/host_offload.py)."""

import pytest

torch = pytest.importorskip("torch")

from zbsolve.runtime.host_offload import HostCopies, offload_forwards  # noqa: E402


class Stage:
    """The parts of torch's PipelineStage that offload wraps: a forward per chunk id."""

    def __init__(self, submod):
        self.submod, self.stage_index = submod, 3

    def forward_one_chunk(self, fwd_chunk_id, x):
        return self.submod(x)


def test_only_the_offloaded_microbatches_copy_what_they_save_and_gradients_stay():
    torch.manual_seed(0)
    layer = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())
    stage = Stage(layer)
    copies = HostCopies({}, {})
    offload_forwards(stage, {1}, copies)
    x = torch.randn(2, 4, requires_grad=True)
    kept = stage.forward_one_chunk(0, x)
    assert copies.tensors == {3: 0}
    sent = stage.forward_one_chunk(1, x)
    # Linear saves its input (the weight is the stage's: it stays), Tanh its output: 2 tensors
    # of 2 x 4 float32
    assert copies.tensors == {3: 2} and copies.nbytes == {3: 2 * 2 * 4 * 4}
    got = torch.autograd.grad(sent.sum(), [x, *layer.parameters()])
    want = torch.autograd.grad(kept.sum(), [x, *layer.parameters()])
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
