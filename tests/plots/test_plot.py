"""Plots: files of the asked format, memory curves that agree with the metrics."""

from dataclasses import replace

import pytest
from helpers import placed_problems, uniform
from hypothesis import given

from zbsolve.baselines import run_baseline
from zbsolve.baselines.reference import one_f_one_b_reference
from zbsolve.cli import main
from zbsolve.formats.schedule_json import write_schedule
from zbsolve.plots.schedule_plot import memory_steps, plot
from zbsolve.problem.problem import Pipe, Problem, Stage, StageCost
from zbsolve.solvers import solve


@pytest.mark.parametrize("name, placement, overlap", [
    ("zb-h1", "single", None), ("zb-v", "vshape", None), ("dualpipe", "bidirectional", 1.5),
])
def test_memory_curve_peaks_are_the_reported_peaks(name, placement, overlap):
    s = run_baseline(name, uniform(4, 8, placement=placement, fb_overlap=overlap))
    for d in range(4):
        times, levels = memory_steps(s, d)
        assert max(levels) == pytest.approx(s.metrics.peak_memory[d])
        assert levels[-1] == pytest.approx(0) and times == sorted(times)


def test_png_and_svg_are_written_with_the_reference(tmp_path):
    s = run_baseline("dualpipe", uniform(4, 8, placement="bidirectional", fb_overlap=1.5))
    plot(s, tmp_path / "a.png", reference=one_f_one_b_reference(s.problem))
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    plot(s, tmp_path / "a.svg")
    svg = (tmp_path / "a.svg").read_text()
    assert "<svg" in svg and "device 3" in svg and "F&amp;B pair" in svg


def test_plot_command_refuses_an_invalid_file_and_a_bad_suffix(capsys, tmp_path):
    path = tmp_path / "s.json"
    s = run_baseline("1f1b", uniform(2, 2))
    broken = s.devices[0][:-1]  # drop an op: the validator must refuse the file
    write_schedule(type(s)(s.name, s.problem, (broken,) + s.devices[1:], s.metrics, s.solver), path)
    assert main(["plot", str(path), "-o", str(tmp_path / "x.png")]) == 1
    assert "missing" in capsys.readouterr().err
    assert main(["plot", str(path), "-o", str(tmp_path / "x.txt")]) == 2
    assert ".png" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists() and not (tmp_path / "x.txt").exists()


def test_a_hand_built_schedule_is_drawn_without_a_1f1b_reference(capsys, tmp_path):
    # Three stages on two devices: the reference took len(stages) // P stages per rank and
    # dropped one; two pipes of one and two stages gave a rank with no stage (F = 0, refused).
    cost = StageCost(1.0, 1.0, 1.0, 1.0, 0.5)
    for pipes in ((Pipe((Stage(0, 0), Stage(1, 0), Stage(1, 0)), (0, 1, 2)),),
                  (Pipe((Stage(0, 0), Stage(1, 0)), (0, 2)), Pipe((Stage(2, 0),), (1,)))):
        devices = 1 + max(s.device for pipe in pipes for s in pipe.stages)
        problem = Problem(devices=devices, microbatches=3, stage_costs=(cost,), pipes=pipes)
        assert one_f_one_b_reference(problem) is None
        path, target = tmp_path / "s.json", tmp_path / "s.png"
        write_schedule(solve(problem, "list", time_limit=1, workers=1), path)
        assert main(["plot", str(path), "-o", str(target)]) == 0
        assert "no single chain to run 1F1B on" in capsys.readouterr().err
        assert target.read_bytes()[:4] == b"\x89PNG"


@given(placed_problems())
def test_every_named_placement_has_its_1f1b_reference(problem):
    reference = one_f_one_b_reference(problem)
    assert reference is not None and reference.problem.placement == "single"
    assert reference.problem.devices == problem.devices
    # a file that names a placement its pipes do not have is hand-built
    edited = replace(problem, pipes=problem.pipes[::-1]) if len(problem.pipes) > 1 else replace(
        problem, pipes=(replace(problem.pipes[0], stages=problem.pipes[0].stages[::-1]),))
    def devices(p):
        return [([s.device for s in pipe.stages], pipe.microbatches) for pipe in p.pipes]

    assert (one_f_one_b_reference(edited) is None) == (devices(edited) != devices(problem))


def test_solve_plot_option_writes_the_figure(capsys, tmp_path):
    target = tmp_path / "s.png"
    assert main(["solve", "--stages", "2", "--microbatches", "4", "-q", "--plot", str(target)]) == 0
    assert target.read_bytes()[:4] == b"\x89PNG"


def test_devices_with_the_same_memory_curve_stay_apart_by_dashes():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    from zbsolve.plots.schedule_plot import _memory

    s = run_baseline("dualpipe", uniform(4, 8, placement="bidirectional", fb_overlap=2.4))
    assert memory_steps(s, 0) == memory_steps(s, 3)  # mirror-image devices: one curve
    figure, ax = pyplot.subplots()
    _memory(ax, s)
    styles = [line.get_linestyle() for line in ax.lines if line.get_label().startswith("device")]
    pyplot.close(figure)
    assert len(styles) == 4 and len(set(styles)) == 4


def test_every_op_is_one_bar_in_its_row_with_its_kind_s_colour_and_direction_s_shade():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot
    from matplotlib.colors import to_rgba

    from zbsolve.plots.schedule_plot import _gantt, shade

    s = run_baseline("dualpipe", uniform(4, 8, placement="bidirectional", fb_overlap=2.4))
    figure, ax = pyplot.subplots()
    _gantt(ax, s, s.metrics.makespan, 400 / s.metrics.makespan)
    drawn = []
    for collection in ax.collections:
        colour = tuple(collection.get_facecolor()[0])
        for path in collection.get_paths():
            (x0, y0), (x1, y1) = path.vertices.min(axis=0), path.vertices.max(axis=0)
            drawn.append((round(x0, 9), round(x1, 9), round(y0, 9), round(y1, 9), colour))
    for patch in ax.patches:  # bars drawn one by one, as before the collections
        box = patch.get_bbox()
        drawn.append((round(box.x0, 9), round(box.x1, 9), round(box.y0, 9), round(box.y1, 9),
                       tuple(patch.get_facecolor())))
    pyplot.close(figure)
    expected = []
    for d, ops in enumerate(s.devices):
        row = 4 - 1 - d
        for t in ops:
            low, high = (row - 0.4, row + 0.4) if t.overlap is None else \
                ((row, row + 0.4) if t.op.kind == "F" else (row - 0.4, row))
            expected.append((round(t.start, 9), round(t.end, 9), round(low, 9), round(high, 9),
                             to_rgba(shade(t.op.kind, t.op.pipe))))  # pipe 0 runs down, pipe 1 up
    assert sorted(drawn) == sorted(expected)
    assert len({shade("F", 0), shade("F", 1), shade("B", 0), shade("B", 1)}) == 4


@pytest.mark.parametrize("name, placement, overlap, memory", [
    ("dualpipe", "bidirectional", 1.5, "1.125x"), ("1f1b", "single", None, None), ("zb-v", "vshape", None, "1x"),
])
def test_the_memory_legend_sits_above_every_curve_and_the_limit(name, placement, overlap, memory):
    # It sat in the upper right over the plateau, where the curves and the limit meet.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from zbsolve.plots.schedule_plot import _memory

    s = run_baseline(name, uniform(8, 16, placement=placement, fb_overlap=overlap, memory=memory))
    highest = max(max(memory_steps(s, d)[1]) for d in range(8))
    if s.problem.memory_limit is not None:
        highest = max(highest, max(s.problem.memory_limit))
    fig, ax = plt.subplots(figsize=(7, 2))
    try:
        _memory(ax, s)
        fig.canvas.draw()
        box = ax.get_legend().get_window_extent().transformed(ax.transData.inverted())
        assert box.y0 > highest and box.y1 <= ax.get_ylim()[1]
    finally:
        plt.close(fig)


@pytest.mark.parametrize("placement, chunks", [("vshape", [0, 0, 1, 1]), ("interleaved:2", [0, 0, 1, 1]),
                                               ("single", [0, 0])])
def test_chunks_are_told_apart_by_their_place_on_the_device(placement, chunks):
    from zbsolve.plots.schedule_plot import _kind_handles, chunk_of

    s = run_baseline("1f1b" if placement == "single" else "zb-v" if placement == "vshape" else "interleaved",
                     uniform(2, 4, placement=placement))
    found = chunk_of(s)
    assert [found[(0, k)] for k in range(len(s.problem.pipes[0].stages))] == chunks
    labels = [h.get_label() for h in _kind_handles(s)]
    if placement == "vshape":
        assert labels == ["F chunk 0", "F chunk 1", "B chunk 0", "B chunk 1", "W chunk 0", "W chunk 1"]
    elif placement == "single":
        assert labels == ["F", "BW"]


def test_many_devices_get_a_colour_scale_and_the_axis_names_u(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from zbsolve.plots.schedule_plot import _memory

    s = run_baseline("zb-v", uniform(16, 32, placement="vshape"))
    fig, ax = plt.subplots()
    try:
        _memory(ax, s)
        assert ax.get_legend() is None and len(fig.axes) == 2  # the colour bar's own axes
        assert fig.axes[1].get_ylabel() == "device"
        assert ax.get_ylabel() == "activation memory\n(U = 16)"
    finally:
        plt.close(fig)


def test_the_title_leads_with_the_objective_and_its_bound():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from zbsolve.plots.schedule_plot import _gantt

    s = solve(uniform(4, 8, memory="1x", objective="span"), "cpsat", time_limit=5, workers=1)
    fig, ax = plt.subplots()
    try:
        _gantt(ax, s, s.metrics.makespan, 400 / s.metrics.makespan)
        assert ax.get_title().startswith(f"solved: span {s.metrics.span:.6g} ms (bound {s.solver.bound:.6g}, gap ")
    finally:
        plt.close(fig)


@pytest.mark.parametrize("reference, beside", [("none", None), ("1f1b", "1f1b"), ("v-min", "v-min"),
                                               ("FILE", "zb-v")])
def test_plot_reference_is_1f1b_any_baseline_a_file_or_none(tmp_path, capsys, reference, beside):
    from unittest import mock

    from zbsolve.plots import schedule_plot

    schedule_file = tmp_path / "zbv.json"
    write_schedule(run_baseline("zb-v", uniform(4, 8, placement="vshape")), schedule_file)
    choice = str(schedule_file) if reference == "FILE" else reference
    with mock.patch.object(schedule_plot, "_gantt", wraps=schedule_plot._gantt) as gantt:  # a spy: it still draws
        assert main(["plot", str(schedule_file), "-o", str(tmp_path / "out.png"), "--reference", choice]) == 0
    names = [call.args[1].name for call in gantt.call_args_list]
    assert names == ["zb-v"] + ([beside] if beside else [])
    assert (tmp_path / "out.png").read_bytes()[:4] == b"\x89PNG"
    capsys.readouterr()
    assert main(["plot", str(schedule_file), "-o", str(tmp_path / "out.png"), "--reference", "zb-h1"]) == 2
    assert "does not fit" in capsys.readouterr().err
    assert main(["plot", str(schedule_file), "-o", str(tmp_path / "out.png"), "--reference", "nothing"]) == 2
    assert "is none of them" in capsys.readouterr().err


def test_the_memory_axis_names_the_costs_unit():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from zbsolve.plots.schedule_plot import _memory

    fig, ax = plt.subplots()
    try:
        _memory(ax, run_baseline("1f1b", uniform(4, 8, memory_unit_name="GB")))
        assert ax.get_ylabel() == "activation memory (GB)"
    finally:
        plt.close(fig)


def test_copies_are_thin_rows_under_their_device_s_compute():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    from zbsolve.plots.schedule_plot import COPY_ROWS, _gantt

    s = run_baseline("1f1b-o", uniform(2, 3, offload=1.0, levers=("offload",)))
    assert s.offloaded() == 3
    figure, ax = pyplot.subplots()
    _gantt(ax, s, s.metrics.makespan, 400 / s.metrics.makespan)
    spans = set()
    for collection in ax.collections:
        for path in collection.get_paths():
            (x0, y0), (x1, y1) = path.vertices.min(axis=0), path.vertices.max(axis=0)
            spans.add((round(x0, 9), round(x1, 9), round(y0, 9), round(y1, 9)))
    pyplot.close(figure)
    for d, ops in enumerate(s.devices):
        row = 1 - d
        for t in ops:
            below, height = COPY_ROWS.get(t.op.kind, (-0.15, 0.55))
            assert (round(t.start, 9), round(t.end, 9), round(row + below, 9), round(row + below + height, 9)) in spans
    # the rows keep apart: the d2h row, the h2d row, then compute
    assert COPY_ROWS["O"][0] + COPY_ROWS["O"][1] <= COPY_ROWS["L"][0] and COPY_ROWS["L"][0] + COPY_ROWS["L"][1] <= -0.15
