"""The call wrapper (native CallWrapper and its Python twin): transparent, records the
outermost call per category, and only while recording."""

from __future__ import annotations

import collections
import math
import pickle
import threading
import time
import types
from pathlib import Path

import pytest

import rlscope
from rlscope.trace import format as fmt
from rlscope.trace.reader import read_trace

BACKEND, SIMULATOR = 0, 1


def wrap_fn(recorder: str):
    if recorder == "native":
        from rlscope import _native

        return _native.wrap
    from rlscope.recorder import pyrecorder

    return pyrecorder.wrap


def calls(out: Path) -> list[tuple[str, str]]:
    """(kind name, function name) of every call event, in order."""
    (p,) = read_trace(out).processes
    return [(fmt.KIND_NAMES[int(k)], p.strings[int(n)]) for k, n in
            zip(p.events.kind, p.events.name, strict=True) if int(k) >= fmt.BACKEND_CALL_BEGIN]


def test_transparent_results_exceptions_attributes(recorder: str):
    w = wrap_fn(recorder)(math.hypot, BACKEND, "math.hypot")
    assert w(3, 4) == 5.0
    assert w.__wrapped__ is math.hypot
    assert w.__name__ == "hypot" and w.__doc__ == math.hypot.__doc__
    assert repr(w) == repr(math.hypot)
    assert w == math.hypot and hash(w) == hash(math.hypot)
    assert isinstance(w, types.BuiltinFunctionType)
    with pytest.raises(TypeError):
        w("a", 1)
    wsorted = wrap_fn(recorder)(sorted, BACKEND, "sorted")
    assert wsorted([3, 1, 2], key=lambda x: -x, reverse=True) == [1, 2, 3]


def test_binds_like_the_wrapped_method(recorder: str):
    class S(str):
        pass

    S.upper = wrap_fn(recorder)(str.upper, BACKEND, "str.upper")
    s = S("ab")
    assert s.upper() == "AB"
    assert S.upper(s) == "AB"
    bound = s.upper
    assert bound() == "AB"

    class N(int):
        pass

    N.__add__ = wrap_fn(recorder)(int.__add__, BACKEND, "int.__add__")  # via the nb_add slot
    assert N(2) + 3 == 5


def test_pickles_like_the_original(recorder: str, monkeypatch: pytest.MonkeyPatch):
    w = wrap_fn(recorder)(math.hypot, BACKEND, "math.hypot")
    monkeypatch.setattr(math, "hypot", w)
    assert pickle.loads(pickle.dumps(w)) is w  # a global reference to math.hypot
    m = wrap_fn(recorder)(str.upper, BACKEND, "str.upper")
    assert pickle.loads(pickle.dumps(m)) is str.upper


def test_records_outermost_call_once(recorder: str, recording: Path):
    wrap = wrap_fn(recorder)
    inner = wrap(math.sqrt, BACKEND, "lib.inner")
    sim = wrap(math.fabs, SIMULATOR, "sim.step")

    def body(n: int) -> float:
        return inner(n) + sim(-1.0) + (outer(n - 1) if n > 0 else 0.0)

    outer = wrap(body, BACKEND, "lib.outer")
    with rlscope.operation("op"):
        outer(2)  # recursion re-enters outer; inner runs inside outer
        inner(4.0)
        with pytest.raises(ValueError):
            inner(-1.0)  # exception: END is still recorded
    rlscope.stop()
    assert calls(recording) == [
        ("BACKEND_CALL_BEGIN", "lib.outer"),
        ("SIMULATOR_CALL_BEGIN", "sim.step"), ("SIMULATOR_CALL_END", "sim.step"),
        ("SIMULATOR_CALL_BEGIN", "sim.step"), ("SIMULATOR_CALL_END", "sim.step"),
        ("SIMULATOR_CALL_BEGIN", "sim.step"), ("SIMULATOR_CALL_END", "sim.step"),
        ("BACKEND_CALL_END", "lib.outer"),
        ("BACKEND_CALL_BEGIN", "lib.inner"), ("BACKEND_CALL_END", "lib.inner"),
        ("BACKEND_CALL_BEGIN", "lib.inner"), ("BACKEND_CALL_END", "lib.inner"),
    ]


def test_nothing_recorded_when_idle_and_per_thread(recorder: str, tmp_path: Path):
    w = wrap_fn(recorder)(time.sleep, BACKEND, "time.sleep")
    w(0)  # not recording: just forwarded
    out = tmp_path / "t"
    rlscope.start(out, recorder=recorder)
    try:
        threads = [threading.Thread(target=lambda: [w(0) for _ in range(5)]) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        rlscope.stop()
    w(0)
    counts = collections.Counter(k for k, _ in calls(out))
    assert counts == {"BACKEND_CALL_BEGIN": 15, "BACKEND_CALL_END": 15}


def test_rejects_bad_arguments(recorder: str):
    wrap = wrap_fn(recorder)
    with pytest.raises(TypeError):
        wrap(42, BACKEND, "x")
    with pytest.raises(ValueError):
        wrap(len, 7, "x")


# -- the operation wrapper (native OpWrapper and its Python twin) --------------------------

def op_wrap_fn(recorder: str):
    if recorder == "native":
        from rlscope import _native

        return _native.wrap_operation
    from rlscope.recorder import pyrecorder

    return pyrecorder.wrap_operation


def ops(out: Path) -> list[tuple[str, str]]:
    (p,) = read_trace(out).processes
    return [(fmt.KIND_NAMES[int(k)], p.strings[int(n)]) for k, n in
            zip(p.events.kind, p.events.name, strict=True)
            if int(k) in (fmt.OPERATION_BEGIN, fmt.OPERATION_END)]


class Env:
    def step(self, a: int, *, scale: int = 1) -> int:
        """Step it."""
        if a < 0:
            raise ValueError("negative")
        return a * scale


def test_operation_wrapper_is_transparent_and_binds(recorder: str):
    raw = Env.__dict__["step"]
    w = op_wrap_fn(recorder)(raw, "simulation")
    assert w.__wrapped__ is raw and w._rlscope_op == "simulation"
    assert w.__name__ == "step" and w.__doc__ == "Step it."

    class E(Env):
        step = w

    assert E().step(3, scale=2) == 6 and E.step(E(), 2) == 2
    with pytest.raises(ValueError):
        E().step(-1)
    w.flag = True  # attributes set on the wrapper stay on it
    assert w.flag is True and not hasattr(raw, "flag")
    if recorder == "native":
        with pytest.raises(AttributeError):
            w.__wrapped__ = len  # read-only
    with pytest.raises(TypeError):
        op_wrap_fn(recorder)(42, "simulation")
    with pytest.raises(TypeError):
        op_wrap_fn(recorder)(raw, "simulation", first_use=print)  # and no key


def test_operation_wrapper_records_unless_open(recorder: str, recording: Path):
    seen: list[object] = []

    def first(env: object) -> None:
        seen.append(env)
        env.__dict__["_seen"] = True

    class E(Env):
        step = op_wrap_fn(recorder)(Env.__dict__["step"], "simulation", first_use=first,
                                    key="_seen")

    a, b = E(), E()
    a.step(1)
    with pytest.raises(ValueError):
        a.step(-1)  # the END is recorded all the same
    with rlscope.operation("simulation"):
        b.step(1)  # open already: not again
    with rlscope.operation("inference"):
        a.step(2)
    rlscope.stop()
    a.step(3)  # not recording: forwarded, nothing recorded, no first use
    assert seen == [a, b]
    # The one call passed on inside its open operation is counted (the correction
    # prices it: kinds.PASSED_CALL); the count can be cleared.
    w = E.__dict__["step"]
    assert w._rlscope_passed == 1
    w._rlscope_passed = 0
    assert w._rlscope_passed == 0
    assert ops(recording) == [
        ("OPERATION_BEGIN", "simulation"), ("OPERATION_END", "simulation"),
        ("OPERATION_BEGIN", "simulation"), ("OPERATION_END", "simulation"),
        ("OPERATION_BEGIN", "simulation"), ("OPERATION_END", "simulation"),
        ("OPERATION_BEGIN", "inference"),
        ("OPERATION_BEGIN", "simulation"), ("OPERATION_END", "simulation"),
        ("OPERATION_END", "inference"),
    ]


def env_call_fn(recorder: str):
    if recorder == "native":
        from rlscope import _native

        return _native.env_call
    from rlscope.recorder import pyrecorder

    return pyrecorder.env_call


def env_events(out: Path) -> list[tuple[str, str]]:
    """(kind name, name) of the env and operation events, in order."""
    (p,) = read_trace(out).processes
    keep = (fmt.OPERATION_BEGIN, fmt.OPERATION_END, fmt.ENV_STEP_BEGIN, fmt.ENV_STEP_END,
            fmt.ENV_RESET_BEGIN, fmt.ENV_RESET_END)
    return [(fmt.KIND_NAMES[int(k)], p.strings[int(n)]) for k, n in
            zip(p.events.kind, p.events.name, strict=True) if int(k) in keep]


def test_env_call_is_transparent_and_pickles_as_the_method(recorder: str):
    from rlscope.intercept.patch import is_env_call

    env = Env()
    w = env_call_fn(recorder)(env.step, False, 3, "CartPole-v1", "simulation")
    assert is_env_call(w) and w.__wrapped__ == env.step and w.index == 3
    assert w.__name__ == "step" and w.__self__ is env
    assert w(2, scale=3) == 6
    with pytest.raises(ValueError):
        w(-1)
    env.step = w  # an env copied or pickled gets its plain method back
    back = pickle.loads(pickle.dumps(env))
    assert not is_env_call(back.__dict__.get("step")) and back.step(4) == 4
    with pytest.raises(TypeError):
        env_call_fn(recorder)(42, False, 0, "x", "simulation")


def test_env_call_records_the_step_inside_simulation(recorder: str, recording: Path):
    env = Env()
    step = env_call_fn(recorder)(env.step, False, 5, "CartPole-v1", "simulation")
    reset = env_call_fn(recorder)(env.step, True, 5, "CartPole-v1", "simulation")
    step(1)  # opens simulation inside the env step
    with pytest.raises(ValueError):
        step(-1)  # the ends are recorded all the same
    with rlscope.operation("simulation"):
        reset(1)  # open already: not again
    rlscope.stop()
    step(1)  # not recording: forwarded, nothing recorded
    E, S = "CartPole-v1", "simulation"
    assert env_events(recording) == [
        ("ENV_STEP_BEGIN", E), ("OPERATION_BEGIN", S), ("OPERATION_END", S),
        ("ENV_STEP_END", E),
        ("ENV_STEP_BEGIN", E), ("OPERATION_BEGIN", S), ("OPERATION_END", S),
        ("ENV_STEP_END", E),
        ("OPERATION_BEGIN", S), ("ENV_RESET_BEGIN", E), ("ENV_RESET_END", E),
        ("OPERATION_END", S),
    ]


def test_env_events_name_each_vector_env(recorder: str, recording: Path):
    """Two vector envs stepped in turn (the native recorder caches the last name's id:
    the cache must follow the name)."""
    from rlscope import annotate

    rec = annotate.active_recorder()
    a, b = "SyncVectorEnv#1", "".join(["SyncVector", "Env#2"])
    for name in (a, b, a, "SyncVectorEnv#1", b):
        rec.env_begin(False, -1, name)
        rec.env_end(False, name)
    if recorder == "native":
        with pytest.raises(TypeError):
            rec.env_begin(False, -1, 42)
    rlscope.stop()
    names = [n for k, n in env_events(recording) if k == "ENV_STEP_BEGIN"]
    assert names == [a, b, a, a, b]


class FakeSampled:
    """What the vector-step wrapper reads of vecenv's _Sampled: last, interval, start, stop."""

    def __init__(self, interval: int) -> None:
        self.last, self.interval, self.calls = -(1 << 62), interval, []

    def start(self, now: int) -> bool:
        self.last = now
        self.calls.append("start")
        return True

    def stop(self) -> None:
        self.calls.append("stop")


class FakeVec:
    __slots__ = ("__weakref__", "name", "sampled")  # as vecenv's _Vec

    def __init__(self, name: str, sampled: FakeSampled | None) -> None:
        self.name, self.sampled = name, sampled


def test_native_vector_step_parts(recording: Path, recorder: str):
    if recorder != "native":
        pytest.skip("the Python recorder uses vecenv's closures")
    from rlscope import _native

    class Vec:
        def step(self, a: int) -> int:
            if a < 0:
                raise ValueError("bad action")
            return a + 1

        def send(self, a: int) -> None:
            if a < 0:
                raise ValueError("not sent")

        def wait(self) -> int:
            return 7

    smp = FakeSampled(interval=10**15)  # the first call is sampled, no later one
    a, b, other = Vec(), Vec(), Vec()
    vecs = {id(a): FakeVec("Sync#1", smp), id(b): FakeVec("Dummy#2", None)}

    class Whole(Vec):
        step = _native.vec_step(Vec.step, False, 0, vecs)
        send = _native.vec_step(Vec.send, False, 1, vecs)
        wait = _native.vec_step(Vec.wait, False, 2, vecs)

    Whole.step.flag = True  # the patcher marks its wrappers
    assert Whole.step.flag and Whole.step.__wrapped__ is Vec.step
    assert Whole.step.__name__ == "step"
    a.__class__ = b.__class__ = other.__class__ = Whole
    assert a.step(1) == 2 and a.step(2) == 3
    with pytest.raises(ValueError):
        a.step(-1)
    b.send(1)
    assert b.wait() == 7
    with pytest.raises(ValueError):
        b.send(-1)  # nothing sent: the pair is closed at once
    assert other.step(1) == 2  # not a known vector env: forwarded, nothing recorded
    rlscope.stop()
    assert smp.calls == ["start", "stop"]
    assert env_events(recording) == [("ENV_STEP_BEGIN", "Sync#1"), ("ENV_STEP_END", "Sync#1")] * 3 \
        + [("ENV_STEP_BEGIN", "Dummy#2"), ("ENV_STEP_END", "Dummy#2")] * 2


def test_native_vector_step_follows_each_vector_env(recording: Path, recorder: str):
    """The wrapper keeps the vector env it saw last (a loop steps one): calls alternating
    between vector envs, one that cannot be weakly referenced, and one gone with another
    made after it (perhaps at its address) are each recorded under their own name and
    sampled on their own clock."""
    if recorder != "native":
        pytest.skip("the Python recorder uses vecenv's closures")
    import gc

    from rlscope import _native

    class Vec:
        def step(self) -> int:
            return 1

    class Slotted:  # no __weakref__: looked up at every call
        __slots__ = ()

        def step(self) -> int:
            return 2

    once, every, slotted = FakeSampled(10**15), FakeSampled(0), FakeSampled(0)
    a, b, s = Vec(), Vec(), Slotted()
    vecs = {id(a): FakeVec("A#1", once), id(b): FakeVec("B#2", every),
            id(s): FakeVec("S#3", slotted)}

    class W(Vec):
        step = _native.vec_step(Vec.step, False, 0, vecs)

    class WS(Slotted):
        __slots__ = ()
        step = _native.vec_step(Slotted.step, False, 0, vecs)

    a.__class__ = b.__class__ = W
    s.__class__ = WS
    for v in (a, b, a, a, b, s, b, s):
        v.step()
    assert once.calls == ["start", "stop"]  # its first call only, whatever came between
    assert every.calls == ["start", "stop"] * 3
    assert slotted.calls == ["start", "stop"] * 2
    import weakref

    a.step()  # the wrapper's last: then gone
    gone = weakref.ref(vecs[id(a)])
    del vecs[id(a)]
    del a
    gc.collect()
    assert gone() is None  # the wrapper does not keep a vector env's state alive
    c = Vec()
    c.__class__ = W
    vecs[id(c)] = FakeVec("C#4", None)
    assert c.step() == 1
    rlscope.stop()
    names = [n for k, n in env_events(recording) if k == "ENV_STEP_BEGIN"]
    assert names == ["A#1", "B#2", "A#1", "A#1", "B#2", "S#3", "B#2", "S#3", "A#1", "C#4"]


def test_native_vector_step_closes_the_pair_when_sampling_fails(recording: Path,
                                                                 recorder: str):
    if recorder != "native":
        pytest.skip("the Python recorder uses vecenv's closures")
    from rlscope import _native

    class Broken(FakeSampled):
        def start(self, now: int) -> bool:
            raise RuntimeError("stand-ins could not be swapped in")

    class Vec:
        def send(self) -> None:
            pass

        def wait(self) -> int:
            return 1

    v = Vec()
    vecs = {id(v): FakeVec("Dummy#3", Broken(interval=0))}

    class Split(Vec):
        send = _native.vec_step(Vec.send, False, 1, vecs)
        wait = _native.vec_step(Vec.wait, False, 2, vecs)

    v.__class__ = Split
    v.send()
    with pytest.raises(RuntimeError):
        v.wait()
    rlscope.stop()
    assert env_events(recording) == [("ENV_STEP_BEGIN", "Dummy#3"), ("ENV_STEP_END", "Dummy#3")]


def test_passed_calls_are_written_per_operation_at_stop(recorder: str, tmp_path: Path):
    """The wrappers rlscope makes count the calls they pass on while their operation is
    open (nothing is recorded for them), and the counts per operation are written when
    the recording stops (format.META_PASSED_CALLS), then start again from zero."""
    from rlscope.intercept.patch import recorder_op_wrap

    rlscope.start(tmp_path / "a", recorder=recorder)
    step = recorder_op_wrap()(lambda x: x, "simulation")
    fwd = recorder_op_wrap()(lambda x: x, "inference")
    for i in range(5):
        with rlscope.operation("simulation"):
            step(i)  # passed on
        step(i)  # opens its own
    with rlscope.operation("inference"):
        fwd(0)
        fwd(1)
    rlscope.stop()
    rlscope.start(tmp_path / "b", recorder=recorder)
    step(0)  # nothing passed on in this recording
    rlscope.stop()
    (a,) = read_trace(tmp_path / "a").processes
    (b,) = read_trace(tmp_path / "b").processes
    assert a.metadata[fmt.META_PASSED_CALLS] == {"simulation": 5, "inference": 2}
    assert fmt.META_PASSED_CALLS not in b.metadata
