"""Installing and removing interception: what gets wrapped, exact restoration, the import
hook, and option parsing."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rlscope
from rlscope import intercept
from rlscope.intercept.patch import is_wrapper

torch = pytest.importorskip("torch")


@pytest.fixture
def torch_intercepted():
    intercept.enable("torch")
    try:
        yield
    finally:
        intercept.disable()


def test_parse():
    assert intercept.parse("none") == [] and intercept.parse("") == []
    assert intercept.parse("auto") == list(intercept.LIBRARIES)
    assert intercept.parse("tf, gymnasium,torch,tf") == ["tensorflow", "gym", "gym-legacy", "torch"]
    # PufferLib's native envs and its vector envs install apart (two trigger modules).
    assert intercept.parse("pufferlib") == ["pufferlib", "pufferlib-vector"]
    with pytest.raises(ValueError, match="unknown library 'tourch'"):
        intercept.parse("tourch")


def test_torch_wrapped_and_restored_exactly():
    import torch.nn.functional as F
    from torch.autograd.variable import Variable

    before = (torch.add, torch.conv2d, F.linear, torch._C._nn.linear,
              torch._C.TensorBase.__dict__["add"], Variable._execution_engine,
              dict(torch.Tensor.__dict__), dict(vars(torch._VF)))
    intercept.enable("torch")
    try:
        assert is_wrapper(torch.add) and torch.add.__wrapped__ is before[0]
        assert is_wrapper(F.linear) and F.linear is torch._C._nn.linear
        assert is_wrapper(torch.Tensor.__dict__["add"])
        assert is_wrapper(torch.Tensor.__dict__["__add__"])
        assert is_wrapper(vars(torch._VF)["lstm"])
        assert intercept.counts["torch"] > 1000
        # Same results through functions, methods, operators and autograd.
        torch.manual_seed(0)
        x = torch.randn(8, 8, requires_grad=True)
        y = ((x @ x + 1) * x)[2:].relu().sum()
        y.backward()
        assert x.grad is not None and torch.isfinite(x.grad).all()
        p = torch.nn.Parameter(torch.ones(3))
        assert torch.equal(p + p, torch.full((3,), 2.0))
    finally:
        intercept.disable()
    after = (torch.add, torch.conv2d, F.linear, torch._C._nn.linear,
             torch._C.TensorBase.__dict__["add"], Variable._execution_engine,
             dict(torch.Tensor.__dict__), dict(vars(torch._VF)))
    assert all(a is b for a, b in zip(before[:6], after[:6], strict=True))
    assert after[6] == before[6] and after[7] == before[7]


def test_torch_backend_calls_recorded(torch_intercepted, tmp_path: Path):
    from rlscope.trace import format as fmt
    from rlscope.trace.reader import read_trace

    rlscope.start(tmp_path / "t")
    try:
        x = torch.ones(4, requires_grad=True)
        with rlscope.operation("backprop"):
            (x * 2).sum().backward()
    finally:
        rlscope.stop()
    (p,) = read_trace(tmp_path / "t").processes
    names = [p.strings[int(n)] for k, n in zip(p.events.kind, p.events.name, strict=True)
             if int(k) == fmt.BACKEND_CALL_BEGIN]
    assert names[:3] == ["torch.ones", "torch.Tensor.__mul__", "torch.Tensor.sum"]
    assert "torch.autograd.backward" in names


def test_torch_phase_markers(recorder: str, tmp_path: Path):
    """The outermost module forward, zero_grad and the optimizer step are MARK_CALL
    events (nested module calls are not), with both recorders; an optimizer class torch
    hooked before interception began is marked too; analysis infers the operations."""
    from rlscope.analysis import inferred
    from rlscope.trace import format as fmt
    from rlscope.trace.reader import read_trace

    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    rlscope.start(tmp_path / "t", recorder=recorder)
    intercept.enable("torch")  # after start: wrappers of the recorder in use
    try:
        assert is_wrapper(type(opt).__dict__["step"])
        assert getattr(type(opt).step, "hooked", False)  # torch's own wrapping kept
        with rlscope.operation("simulation"):  # reset
            pass
        with torch.no_grad():
            net(torch.ones(1, 3))  # inference
        with rlscope.operation("simulation"):
            pass
        opt.zero_grad()
        net(torch.ones(2, 3)).sum().backward()
        opt.step()
    finally:
        rlscope.stop()
        intercept.disable()
    assert not is_wrapper(type(opt).__dict__["step"])
    (p,) = read_trace(tmp_path / "t").processes
    marks = [(int(k), p.strings[int(n)]) for k, n in zip(p.events.kind, p.events.name,
                                                        strict=True)
             if int(k) in (fmt.MARK_CALL_BEGIN, fmt.MARK_CALL_END)]
    B, E = fmt.MARK_CALL_BEGIN, fmt.MARK_CALL_END
    assert marks == [(B, "torch.nn.Module"), (E, "torch.nn.Module"),
                     (B, "torch.optim.Optimizer.zero_grad"),
                     (E, "torch.optim.Optimizer.zero_grad"),
                     (B, "torch.nn.Module"), (E, "torch.nn.Module"),
                     (B, "torch.optim.Optimizer.step"), (E, "torch.optim.Optimizer.step")]
    q = inferred.apply(p)
    names = [q.strings[int(n)] for k, n in zip(q.events.kind, q.events.name, strict=True)
             if int(k) == fmt.OPERATION_BEGIN]
    assert names == ["simulation", "inference", "simulation", "backprop"]


def test_import_hook_wraps_on_import(tmp_path: Path):
    code = textwrap.dedent("""
        import sys
        from rlscope import intercept
        intercept.enable("torch,gym")
        assert "torch" not in sys.modules
        import torch, gymnasium
        from rlscope.intercept.patch import is_wrapper
        assert is_wrapper(torch.matmul), torch.matmul
        assert getattr(gymnasium.make, "_rlscope_marked", False)
        intercept.disable()
        assert not is_wrapper(torch.matmul)
        assert not getattr(gymnasium.make, "_rlscope_marked", False)
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_import_hook_on_a_built_in_module():
    """A watched module that the interpreter has built in (``select`` on Debian's and
    Ubuntu's Pythons) is loaded by a class every built-in import shares: the hook must
    leave that class as it was, or the next built-in import recurses forever (seen with
    torch on Ubuntu's Python 3.12)."""
    builtin = next((m for m in ("select", "_symtable", "_tracemalloc", "faulthandler")
                    if m in sys.builtin_module_names), None)
    later = next((m for m in ("_tokenize", "_symtable", "_tracemalloc", "faulthandler")
                  if m in sys.builtin_module_names and m != builtin), None)
    if builtin is None or later is None:
        pytest.skip("this Python has too few built-in modules to import")
    code = textwrap.dedent(f"""
        import sys, importlib.machinery as m
        assert "{builtin}" not in sys.modules and "{later}" not in sys.modules
        from rlscope.intercept import importhook
        seen = []
        importhook.when_imported("{builtin}", lambda mod: seen.append(mod.__name__))
        import {builtin}
        import {later}
        assert "exec_module" in vars(m.BuiltinImporter)
        print(seen)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == f"['{builtin}']"


def test_envs_made_by_a_vector_env_leave_their_class_unmarked(tmp_path: Path):
    """Their steps run inside the vector step: a marked ``step`` would cost each env
    step a call passed on. A stand-alone ``gymnasium.make`` (before or after) marks its
    own env, through a subclass of the same name swapped in as its class, and leaves
    the class, and so the vector env's envs, unmarked; a copy or a pickle of it is an
    env of its own class, and so is the env once a vector env is made of it."""
    pytest.importorskip("gymnasium")
    code = textwrap.dedent(f"""
        import copy, pickle
        import rlscope
        from rlscope import intercept
        from rlscope.trace.reader import read_trace
        rlscope.start({str(tmp_path / "t")!r})
        intercept.enable("gym")
        import gymnasium as gym
        from gymnasium.wrappers import TimeLimit
        before = gym.make("CartPole-v1")
        vec = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2)
        assert type(vec.envs[0]) is TimeLimit
        assert not hasattr(TimeLimit.__dict__["step"], "_rlscope_op")
        vec.reset(seed=0)
        for _ in range(5):
            vec.step(vec.action_space.sample())
        env = gym.make("CartPole-v1")
        assert not hasattr(TimeLimit.__dict__["step"], "_rlscope_op")
        for e in (before, env):
            assert isinstance(e, TimeLimit) and type(e).__name__ == "TimeLimit"
            assert type(e).__dict__["step"]._rlscope_op == "simulation"
        assert type(before) is type(env)  # one subclass per class
        env.reset(seed=0)
        env.step(0)  # its own simulation operation
        for twin in (copy.deepcopy(env), pickle.loads(pickle.dumps(env))):
            assert type(twin) is TimeLimit
        # Handed to a vector env (SB3's PPO("MlpPolicy", env) wraps it so), it is put
        # back to its class: its steps run inside the vector step.
        single = gym.vector.SyncVectorEnv([lambda: env])
        assert type(env) is TimeLimit
        single.reset(seed=0)
        single.step(single.action_space.sample())
        rlscope.stop()
        md = read_trace({str(tmp_path / "t")!r}).processes[0].metadata
        assert "rlscope.passed_calls" not in md, md  # the vector env's steps pass none
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


@pytest.mark.parametrize("collecting", [True, False])
def test_an_install_runs_with_the_collector_paused(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path, collecting: bool):
    """Right after `import torch`, the wrappers an installer makes set off full garbage
    collections that were due anyway (~80 ms of a ~90 ms install here): the install's
    measured cost (its metadata, the cost model's fixed cost of the process) must not
    count them. The collector is paused while the installer runs and left as it was."""
    import gc

    from rlscope import libraries
    from rlscope.trace import format as fmt
    from rlscope.trace.reader import read_trace

    seen: list[bool] = []

    def install(module: object, p: object) -> int:
        seen.append(gc.isenabled())
        return 0

    monkeypatch.setattr(libraries, "installer", lambda name: install)
    was = gc.isenabled()
    try:
        (gc.enable if collecting else gc.disable)()
        rlscope.start(tmp_path)
        try:
            intercept.enable("wait")  # its module (os) is imported: installed now
            assert gc.isenabled() is collecting
        finally:
            intercept.disable()
            rlscope.stop()
    finally:
        (gc.enable if was else gc.disable)()
    assert seen == [False]
    meta = read_trace(tmp_path).processes[0].metadata
    assert int(meta[fmt.META_INSTALL_PREFIX + "wait"]) >= 0
