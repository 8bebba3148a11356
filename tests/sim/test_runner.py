# amaranth: UnusedElaboratable=no
"""The Verilator runner: cache reuse across processes, failures, waves."""

import multiprocessing
import pathlib
import re

import pytest
from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from nnrtl.gen import progress
from nnrtl.sim import runner


#: A Verilator build takes minutes on a busy machine; a hang must not stall CI.
pytestmark = pytest.mark.timeout(900)


class Incrementer(wiring.Component):
    """Adds ``step`` to every beat (a new ``step`` is a new design, hence a new build)."""

    def __init__(self, step):
        self.step = step
        super().__init__({"i": In(stream.Signature(16)), "o": Out(stream.Signature(16))})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.i.ready.eq(1)
        m.d.sync += [self.o.valid.eq(self.i.valid), self.o.payload.eq(self.i.payload + self.step)]
        return m


def _simulate_in_child(cache, step, queue):
    import os
    os.environ["NNRTL_CACHE_DIR"] = str(cache)
    result = runner.simulate(Incrementer(step), test_module="tb_runner_check", name="inc",
                             params={"values": [1, 2]})
    queue.put((result["build_cached"], result["seen"]))


def test_concurrent_builds_share_one_cache_entry(tmp_path):
    """Two processes ask for the same new design at once: one builds, one waits and
    reuses it; a third run finds it in the cache in well under 2 s."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    children = [context.Process(target=_simulate_in_child, args=(tmp_path, 3, queue))
                for _ in range(2)]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=300)
        assert child.exitcode == 0
    outcomes = sorted(queue.get(timeout=5) for _ in children)
    assert outcomes == [(False, [4, 5]), (True, [4, 5])]
    assert len(list((tmp_path / "verilator").glob("inc-*/inc"))) == 1

    pytest.MonkeyPatch().setenv("NNRTL_CACHE_DIR", str(tmp_path))
    result = runner.simulate(Incrementer(3), test_module="tb_runner_check", name="inc",
                             params={"values": [7]}, seed=11)
    assert result["build_cached"] is True and result["build_seconds"] < 2
    assert result["seen"] == [10] and result["seed"] == 11


def test_failing_bench_raises(tmp_path, monkeypatch):
    """... and the build's progress: a line when it starts, the time so far (every
    QUIET_INTERVAL, made short here), the time it took; none for a cached build."""
    monkeypatch.setenv("NNRTL_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(progress, "QUIET_INTERVAL", 0.2)
    lines = []
    with pytest.raises(runner.SimulationError,
                       match=r"^tb_runner_check on inc: 1 of 1 cocotb tests failed; log "):
        runner.simulate(Incrementer(1), test_module="tb_runner_check", name="inc",
                        params={"values": [1], "fail": True}, log=lines.append)
    assert lines[0] == f"building inc with Verilator in {tmp_path / 'verilator'}/" \
        f"{next((tmp_path / 'verilator').glob('inc-*/')).name} ..."
    build = [line for line in lines if line.startswith("Verilator build of inc: ")]
    assert len(build) >= 2 and all(re.fullmatch(r"Verilator build of inc: [\d.]+ s so far",
                                                line) for line in build[:-1])
    assert re.fullmatch(r"Verilator build of inc: done in [\d.]+ s", build[-1])
    assert all(line.startswith(("building inc", "Verilator build of inc: ",
                                "simulation of inc (tb_runner_check): ")) for line in lines)
    # a bench that reports its failure gets it as the first line of the error
    lines.clear()
    with pytest.raises(runner.SimulationError,
                       match=r"^budget overrun: waiting for o\ntb_runner_check on inc: 1 of 1 "
                             r"cocotb tests failed; log "):
        runner.simulate(Incrementer(1), test_module="tb_runner_check", name="inc",
                        params={"values": [1], "fail": True,
                                "failure": "budget overrun: waiting for o"}, log=lines.append)
    assert not any("Verilator build" in line or "building" in line for line in lines)


def test_warning_not_waived_fails_the_build(tmp_path, monkeypatch):
    """Verilator warnings are errors unless waived; the warning is the first line."""
    monkeypatch.setenv("NNRTL_CACHE_DIR", str(tmp_path))
    verilog = ("module sel(input clk, input rst, input [3:0] a, output y);\n"
               "  assign y = a[5];\n"
               "endmodule\n")
    with pytest.raises(runner.SimulationError, match=r"^%Warning-SELRANGE: .*\n"
                                                     r"Verilator build of sel failed"):
        runner.simulate(verilog, test_module="tb_runner_check", name="sel")
    assert "SELRANGE" not in runner.WAIVERS


@pytest.mark.parametrize("waves, magic", [("vcd", b"$version"), ("fst", None)])
def test_waves(tmp_path, monkeypatch, waves, magic):
    monkeypatch.setenv("NNRTL_CACHE_DIR", str(tmp_path))
    result = runner.simulate(Incrementer(2), test_module="tb_runner_check", name="inc",
                             params={"values": [5]}, waves=waves)
    assert result["seen"] == [7]
    data = pathlib.Path(result["waves"]).read_bytes()
    assert result["waves"].endswith(f"dump.{waves}") and len(data) > 100
    if magic:
        assert data.startswith(magic) and b"i__payload" in data


def test_bad_waves_and_missing_name():
    with pytest.raises(ValueError, match=r"^waves must be one of False, True, 'fst', 'vcd', "
                                         r"not 'ghw'$"):
        runner.simulate(Incrementer(1), test_module="x", waves="ghw")
    with pytest.raises(ValueError, match=r"^name is required when design is Verilog text$"):
        runner.simulate("module x; endmodule", test_module="x")


def test_cache_key_depends_on_design_options_and_tools():
    key = runner._cache_key("module a; endmodule", "a", [], False)
    assert re.fullmatch(r"[0-9a-f]{16}", key)
    assert key == runner._cache_key("module a; endmodule", "a", [], False)
    assert key != runner._cache_key("module a ; endmodule", "a", [], False)
    assert key != runner._cache_key("module a; endmodule", "a", ["-O3"], False)
    assert key != runner._cache_key("module a; endmodule", "a", [], "fst")


def test_optimisation_level_defaults_to_O0_is_checked_and_keys_the_cache(monkeypatch):
    monkeypatch.delenv("NNRTL_VERILATOR_OPT", raising=False)
    assert runner.opt_level() == "-O0"
    assert "OPT_FAST=-O0" in runner.verilator_env()["MAKEFLAGS"]
    key = runner._cache_key("module a; endmodule", "a", [], False)
    monkeypatch.setenv("NNRTL_VERILATOR_OPT", "-O2")
    assert runner.opt_level() == "-O2"
    assert "OPT_FAST=-O2 OPT_SLOW=-O2 OPT_GLOBAL=-O2" in runner.verilator_env()["MAKEFLAGS"]
    assert runner._cache_key("module a; endmodule", "a", [], False) != key
    monkeypatch.setenv("NNRTL_VERILATOR_OPT", "fast")
    with pytest.raises(ValueError, match=r"^NNRTL_VERILATOR_OPT='fast' is not a C\+\+ "
                       r"optimisation level; use one of -O0, -O1, -O2, -O3, -Os$"):
        runner.opt_level()


def test_cache_keeps_what_runs_and_stays_bounded(tmp_path, monkeypatch):
    """A build keeps its binary, not its precompiled headers or objects; a later build
    beyond the bound evicts the least recently used entry, never the one just built; the
    pruned entry is reused."""
    monkeypatch.setenv("NNRTL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("NNRTL_CACHE_MAX_SIZE", "0")
    verilator = tmp_path / "verilator"
    result = runner.simulate(Incrementer(5), test_module="tb_runner_check", name="inc",
                             params={"values": [1]})
    assert result["seen"] == [6] and result["build_cached"] is False
    (first,) = [p for p in verilator.iterdir() if p.is_dir()]
    assert (first / "inc").is_file()
    assert not [p.name for p in first.iterdir() if p.suffix in (".gch", ".o", ".a", ".d")]
    result = runner.simulate(Incrementer(6), test_module="tb_runner_check", name="inc",
                             params={"values": [1]})
    assert result["seen"] == [7]
    (second,) = [p for p in verilator.iterdir() if p.is_dir()]
    assert second != first
    result = runner.simulate(Incrementer(6), test_module="tb_runner_check", name="inc",
                             params={"values": [2]})
    assert result["seen"] == [8] and result["build_cached"] is True
