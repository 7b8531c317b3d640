// rlscope._native: the CPython glue. The only file that includes Python.h.
// Thin layer over native/common/recorder.h: argument parsing, the Scope type,
// and turning Status codes into one-line Python exceptions.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "../common/calls.h"
#include "../common/clock.h"
#include "../common/exit_hook.h"
#include "../common/pause.h"
#include "../common/term_watch.h"
#include "../common/recorder.h"
#include "../common/trace_writer.h"

namespace {

using rlscope::Status;
using rlscope::ThreadState;

PyObject* g_error_type = nullptr;      // rlscope.RLScopeError once configured
PyObject* g_decorate = nullptr;        // decorate(scope, func)
PyObject* g_op_cache = nullptr;        // name -> Scope
PyObject* g_phase_cache = nullptr;     // name -> Scope
PyObject* g_current_thread = nullptr;  // threading.current_thread
PyObject* g_str_operation = nullptr;
PyObject* g_str_phase = nullptr;

PyObject* error_type() { return g_error_type ? g_error_type : PyExc_RuntimeError; }

// Registers the calling thread under threading.current_thread().name. Slow
// path, once per thread. Never fails: falls back to the OS thread name.
ThreadState* register_py() {
  std::string name;
  if (!g_current_thread) {
    PyObject* mod = PyImport_ImportModule("threading");
    if (mod) {
      g_current_thread = PyObject_GetAttrString(mod, "current_thread");
      Py_DECREF(mod);
    }
  }
  if (g_current_thread) {
    PyObject* th = PyObject_CallNoArgs(g_current_thread);
    if (th) {
      PyObject* n = PyObject_GetAttrString(th, "name");
      if (n && PyUnicode_Check(n)) {
        const char* s = PyUnicode_AsUTF8(n);
        if (s) name = s;
      }
      Py_XDECREF(n);
      Py_DECREF(th);
    }
  }
  if (PyErr_Occurred()) PyErr_Clear();
  if (name.empty()) return rlscope::current_thread();
  return rlscope::register_thread(name);
}

inline ThreadState* thread_state() {
  ThreadState* t = rlscope::tls_thread;
  return t ? t : register_py();
}

const char* kind_word(uint32_t begin_kind) {
  return begin_kind == rlscope::PHASE_BEGIN ? "phase" : "operation";
}

std::string describe(const rlscope::StackEntry& e) {
  return std::string(kind_word(e.kind)) + " '" + rlscope::string_of(e.name) + "'";
}

std::string describe_stack(const std::vector<rlscope::StackEntry>& entries) {
  std::string s = "[";
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i) s += ", ";
    s += describe(entries[i]);
  }
  return s + "]";
}

// ------------------------------------------------------------------ Scope

struct ScopeObject {
  PyObject_HEAD
  PyObject* name;       // str
  uint32_t name_id;
  uint32_t begin_kind;  // OPERATION_BEGIN or PHASE_BEGIN
};

// Scopes this thread entered while nothing recorded and has not exited yet. One of them
// exited once a recording has begun (rlscope.start() inside a with-block, a chunk
// calibration copy forked mid-phase that runs on to the program's end) was never pushed:
// that is not the user's mistake, and must not raise. Forked children inherit the count.
thread_local uint32_t t_unrecorded_open = 0;

PyObject* scope_enter(PyObject* self, PyObject*) {
  auto* s = reinterpret_cast<ScopeObject*>(self);
  if (rlscope::g_hot.session.load(std::memory_order_relaxed) == 0) {
    ++t_unrecorded_open;
  } else {
    ThreadState* t = thread_state();
    if (__builtin_expect(rlscope::push(t, s->begin_kind, s->name_id) == rlscope::TOO_DEEP, 0)) {
      PyErr_Format(error_type(),
                   "%s '%U' entered with %u scopes already open on this thread "
                   "(the limit); check for scopes that are entered but never exited",
                   kind_word(s->begin_kind), s->name, unsigned(rlscope::kMaxDepth));
      return nullptr;
    }
  }
  Py_INCREF(self);
  return self;
}

PyObject* scope_exit_slow(ScopeObject* s, ThreadState* t, bool exc_in_flight) {
  std::vector<rlscope::StackEntry> unwound;
  Status st = t ? rlscope::exit_scope(t, s->begin_kind, s->name_id, &unwound)
                : rlscope::NOT_ON_STACK;
  if (!exc_in_flight) {
    if (st == rlscope::MISMATCH) {
      PyErr_Format(error_type(),
                   "%s '%U' exited while scopes entered inside it were still open: %s; "
                   "exit scopes in reverse order of entry (they were closed now)",
                   kind_word(s->begin_kind), s->name, describe_stack(unwound).c_str());
      return nullptr;
    }
    if (st == rlscope::NOT_ON_STACK) {
      PyErr_Format(error_type(),
                   "%s '%U' exited without a matching enter on this thread; enter and "
                   "exit a scope on the same thread",
                   kind_word(s->begin_kind), s->name);
      return nullptr;
    }
  }
  Py_RETURN_FALSE;
}

PyObject* scope_exit(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  auto* s = reinterpret_cast<ScopeObject*>(self);
  if (rlscope::g_hot.session.load(std::memory_order_relaxed) == 0) {
    if (t_unrecorded_open) --t_unrecorded_open;
    Py_RETURN_FALSE;
  }
  ThreadState* t = rlscope::tls_thread;
  if (__builtin_expect(t != nullptr, 1) &&
      __builtin_expect(rlscope::exit_innermost(t, s->begin_kind, s->name_id) !=
                           rlscope::NOT_ON_STACK, 1)) {
    Py_RETURN_FALSE;
  }
  if (t_unrecorded_open && (t == nullptr || !rlscope::on_stack(t, s->begin_kind, s->name_id))) {
    --t_unrecorded_open;  // entered before this recording began: nothing to close
    Py_RETURN_FALSE;
  }
  bool in_flight = nargs > 0 && args[0] != Py_None;
  return scope_exit_slow(s, t, in_flight);
}

PyObject* scope_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  PyObject* func;
  if (kwargs && PyDict_GET_SIZE(kwargs)) {
    PyErr_SetString(PyExc_TypeError, "a scope used as a decorator takes one function");
    return nullptr;
  }
  if (!PyArg_UnpackTuple(args, "__call__", 1, 1, &func)) return nullptr;
  if (!g_decorate) {
    PyErr_SetString(error_type(),
                    "rlscope._native.configure() was not called; import rlscope instead of "
                    "rlscope._native");
    return nullptr;
  }
  return PyObject_CallFunctionObjArgs(g_decorate, self, func, nullptr);
}

PyObject* scope_repr(PyObject* self) {
  auto* s = reinterpret_cast<ScopeObject*>(self);
  return PyUnicode_FromFormat("<rlscope %s %R>", kind_word(s->begin_kind), s->name);
}

PyObject* scope_get_kind(PyObject* self, void*) {
  auto* s = reinterpret_cast<ScopeObject*>(self);
  PyObject* k = s->begin_kind == rlscope::PHASE_BEGIN ? g_str_phase : g_str_operation;
  Py_INCREF(k);
  return k;
}

void scope_dealloc(PyObject* self) {
  auto* s = reinterpret_cast<ScopeObject*>(self);
  Py_XDECREF(s->name);
  Py_TYPE(self)->tp_free(self);
}

PyMethodDef scope_methods[] = {
    {"__enter__", scope_enter, METH_NOARGS, "Open the scope (records BEGIN)."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(scope_exit)),
     METH_FASTCALL, "Close the scope (records END); never swallows exceptions."},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef scope_members[] = {
    {"name", T_OBJECT_EX, offsetof(ScopeObject, name), READONLY, "scope name"},
    {nullptr, 0, 0, 0, nullptr},
};

PyGetSetDef scope_getset[] = {
    {"kind", scope_get_kind, nullptr, "'operation' or 'phase'", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyTypeObject ScopeType = {
    PyVarObject_HEAD_INIT(nullptr, 0)
};

void init_scope_type() {
  ScopeType.tp_name = "rlscope._native.Scope";
  ScopeType.tp_basicsize = sizeof(ScopeObject);
  ScopeType.tp_dealloc = scope_dealloc;
  ScopeType.tp_repr = scope_repr;
  ScopeType.tp_call = scope_call;
  ScopeType.tp_flags = Py_TPFLAGS_DEFAULT;
  ScopeType.tp_doc =
      "A named operation or phase; use as a context manager or a decorator.";
  ScopeType.tp_methods = scope_methods;
  ScopeType.tp_members = scope_members;
  ScopeType.tp_getset = scope_getset;
}

// Cached Scope for (kind, name); new reference.
PyObject* get_scope(uint32_t begin_kind, PyObject* name) {
  if (!PyUnicode_Check(name)) {
    PyErr_Format(PyExc_TypeError, "%s name must be a str, not %.100s", kind_word(begin_kind),
                 Py_TYPE(name)->tp_name);
    return nullptr;
  }
  PyObject* cache = begin_kind == rlscope::PHASE_BEGIN ? g_phase_cache : g_op_cache;
  PyObject* s = PyDict_GetItemWithError(cache, name);
  if (s) {
    Py_INCREF(s);
    return s;
  }
  if (PyErr_Occurred()) return nullptr;
  Py_ssize_t len;
  const char* utf8 = PyUnicode_AsUTF8AndSize(name, &len);
  if (!utf8) return nullptr;
  if (len == 0) {
    PyErr_Format(error_type(), "%s name must be a non-empty string", kind_word(begin_kind));
    return nullptr;
  }
  auto* obj = PyObject_New(ScopeObject, &ScopeType);
  if (!obj) return nullptr;
  Py_INCREF(name);
  obj->name = name;
  obj->begin_kind = begin_kind;
  obj->name_id = rlscope::intern(std::string_view(utf8, size_t(len)));
  if (PyDict_SetItem(cache, name, reinterpret_cast<PyObject*>(obj)) < 0) {
    Py_DECREF(obj);
    return nullptr;
  }
  return reinterpret_cast<PyObject*>(obj);
}

// ------------------------------------------------------------------ CallWrapper
// A transparent callable wrapping a native function or method: records the
// outermost call per category (calls.h) and forwards with vectorcall.
// CallWrapper never binds (like builtin functions); MethodCallWrapper wraps
// descriptors that bind as methods (method_descriptor, slot wrappers,
// instancemethod, Python functions) and binds the same way, with
// Py_TPFLAGS_METHOD_DESCRIPTOR so `obj.meth(...)` and type slots call it
// unbound without creating a bound method.

struct CallWrapperObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* wrapped;
  PyObject* name;  // "<library>.<function>" (str)
  PyObject* weakrefs;
  uint32_t name_id;
  uint32_t category;
  // A call that cannot block is not a wait (wrap(..., nonblocking=...)): the argument
  // at `nb_pos` (positional, self included for a method) or keyword `nb_kw` that says
  // so: with nb_mask 0, a zero timeout or a false `block`; else, flags with one of
  // nb_mask's bits (os.WNOHANG). nb_pos < 0: every call is recorded.
  PyObject* nb_kw;  // str or nullptr
  Py_ssize_t nb_pos;
  long nb_mask;
};

// Whether this call of `w` cannot block (its nonblocking argument says so); -1 on error.
int nonblocking_call(CallWrapperObject* w, PyObject* const* args, size_t nargsf,
                     PyObject* kwnames) {
  PyObject* v = nullptr;
  Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  if (w->nb_pos < n) {
    v = args[w->nb_pos];
  } else if (kwnames && w->nb_kw) {
    Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < nk; ++i) {
      PyObject* k = PyTuple_GET_ITEM(kwnames, i);
      if (k == w->nb_kw || PyUnicode_Compare(k, w->nb_kw) == 0) {
        v = args[n + i];
        break;
      }
    }
    if (!v && PyErr_Occurred()) return -1;
  }
  if (!v || v == Py_None) return 0;  // the default (blocking), or no timeout
  if (v == Py_False) return w->nb_mask == 0;
  if (v == Py_True) return 0;
  if (PyLong_CheckExact(v)) {
    long x = PyLong_AsLong(v);
    if (x == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return 0;
    }
    return w->nb_mask == 0 ? x == 0 : (x & w->nb_mask) != 0;
  }
  if (PyFloat_CheckExact(v) && w->nb_mask == 0) return PyFloat_AS_DOUBLE(v) == 0.0;
  return 0;  // anything else: left to the call, recorded
}

PyObject* g_own_attrs = nullptr;  // frozenset of attribute names not forwarded

PyObject* callwrapper_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                                 PyObject* kwnames) {
  auto* w = reinterpret_cast<CallWrapperObject*>(self);
  if (rlscope::g_hot.session.load(std::memory_order_relaxed) == 0 ||
      !rlscope::call_category_on(w->category)) {
    return PyObject_Vectorcall(w->wrapped, args, nargsf, kwnames);
  }
  ThreadState* t = thread_state();
  // Nested in a recorded call of its category, or on a thread whose waits are quiet.
  if (t->in_call[w->category]) return PyObject_Vectorcall(w->wrapped, args, nargsf, kwnames);
  if (w->nb_pos >= 0) {
    int nb = nonblocking_call(w, args, nargsf, kwnames);
    if (nb < 0) return nullptr;
    if (nb) {  // not a wait: run it as one (nothing nested recorded), record nothing
      t->in_call[w->category] = 1;
      PyObject* r = PyObject_Vectorcall(w->wrapped, args, nargsf, kwnames);
      t->in_call[w->category] = 0;
      return r;
    }
  }
  if (!rlscope::call_enter(t, w->category, w->name_id)) {
    return PyObject_Vectorcall(w->wrapped, args, nargsf, kwnames);
  }
  PyObject* r = PyObject_Vectorcall(w->wrapped, args, nargsf, kwnames);
  rlscope::call_exit(t, w->category, w->name_id);
  return r;
}

int callwrapper_traverse(PyObject* self, visitproc visit, void* arg) {
  auto* w = reinterpret_cast<CallWrapperObject*>(self);
  Py_VISIT(w->wrapped);
  return 0;
}

int callwrapper_clear(PyObject* self) {
  auto* w = reinterpret_cast<CallWrapperObject*>(self);
  Py_CLEAR(w->wrapped);
  return 0;
}

void callwrapper_dealloc(PyObject* self) {
  auto* w = reinterpret_cast<CallWrapperObject*>(self);
  PyObject_GC_UnTrack(self);
  if (w->weakrefs) PyObject_ClearWeakRefs(self);
  Py_CLEAR(w->wrapped);
  Py_CLEAR(w->name);
  Py_CLEAR(w->nb_kw);
  PyObject_GC_Del(self);
}

PyObject* callwrapper_getattro(PyObject* self, PyObject* name) {
  int own = PySet_Contains(g_own_attrs, name);
  if (own < 0) return nullptr;
  if (own) return PyObject_GenericGetAttr(self, name);
  return PyObject_GetAttr(reinterpret_cast<CallWrapperObject*>(self)->wrapped, name);
}

int callwrapper_setattro(PyObject* self, PyObject* name, PyObject* value) {
  return PyObject_SetAttr(reinterpret_cast<CallWrapperObject*>(self)->wrapped, name, value);
}

PyObject* callwrapper_repr(PyObject* self) {
  return PyObject_Repr(reinterpret_cast<CallWrapperObject*>(self)->wrapped);
}

// The innermost non-wrapper object (wrappers of wrappers compare as their original).
PyObject* unwrap_all(PyObject* o);

Py_hash_t callwrapper_hash(PyObject* self) { return PyObject_Hash(unwrap_all(self)); }

PyObject* callwrapper_richcompare(PyObject* self, PyObject* other, int op) {
  return PyObject_RichCompare(unwrap_all(self), unwrap_all(other), op);
}

PyObject* methodwrapper_descr_get(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}

// Pickles as the original does: builtins and functions reduce to their global
// name, which pickle resolves (and checks) through the patched module.
PyObject* reduce_as(PyObject* wrapped, PyObject* protocol) {
  if (PyFunction_Check(wrapped)) return PyObject_GetAttrString(wrapped, "__qualname__");
  return PyObject_CallMethod(wrapped, "__reduce_ex__", "O", protocol);
}

PyObject* callwrapper_reduce_ex(PyObject* self, PyObject* protocol) {
  return reduce_as(reinterpret_cast<CallWrapperObject*>(self)->wrapped, protocol);
}

PyObject* callwrapper_reduce(PyObject* self, PyObject*) {
  PyObject* two = PyLong_FromLong(2);
  if (!two) return nullptr;
  PyObject* r = callwrapper_reduce_ex(self, two);
  Py_DECREF(two);
  return r;
}

PyObject* callwrapper_get_category(PyObject* self, void*) {
  return PyLong_FromUnsignedLong(reinterpret_cast<CallWrapperObject*>(self)->category);
}

PyMethodDef callwrapper_methods[] = {
    {"__reduce_ex__", callwrapper_reduce_ex, METH_O, "Pickle as the wrapped object."},
    {"__reduce__", callwrapper_reduce, METH_NOARGS, "Pickle as the wrapped object."},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef callwrapper_members[] = {
    {"__wrapped__", T_OBJECT_EX, offsetof(CallWrapperObject, wrapped), READONLY,
     "the wrapped callable"},
    {"_rlscope_name", T_OBJECT_EX, offsetof(CallWrapperObject, name), READONLY,
     "recorded name"},
    {nullptr, 0, 0, 0, nullptr},
};

PyGetSetDef callwrapper_getset[] = {
    {"_rlscope_category", callwrapper_get_category, nullptr, "0 backend, 1 simulator",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyTypeObject CallWrapperType = {PyVarObject_HEAD_INIT(nullptr, 0)};
PyTypeObject MethodCallWrapperType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyObject* unwrap_all(PyObject* o) {
  while (Py_TYPE(o) == &CallWrapperType || Py_TYPE(o) == &MethodCallWrapperType) {
    o = reinterpret_cast<CallWrapperObject*>(o)->wrapped;
  }
  return o;
}

// What every forwarding wrapper type has: vectorcall, GC, weak references, and for
// descriptors that bind as methods, the same binding (Py_TPFLAGS_METHOD_DESCRIPTOR).
void init_forwarding_type(PyTypeObject* t, const char* name, bool method,
                          Py_ssize_t basicsize, Py_ssize_t vectorcall_offset,
                          Py_ssize_t weaklist_offset) {
  t->tp_name = name;
  t->tp_basicsize = basicsize;
  t->tp_vectorcall_offset = vectorcall_offset;
  t->tp_call = PyVectorcall_Call;
  t->tp_weaklistoffset = weaklist_offset;
  t->tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL;
  if (method) {
    t->tp_flags |= Py_TPFLAGS_METHOD_DESCRIPTOR;
    t->tp_descr_get = methodwrapper_descr_get;
  }
}

void init_callwrapper_type(PyTypeObject* t, const char* name, bool method) {
  init_forwarding_type(t, name, method, sizeof(CallWrapperObject),
                       offsetof(CallWrapperObject, vectorcall),
                       offsetof(CallWrapperObject, weakrefs));
  t->tp_dealloc = callwrapper_dealloc;
  t->tp_repr = callwrapper_repr;
  t->tp_hash = callwrapper_hash;
  t->tp_richcompare = callwrapper_richcompare;
  t->tp_getattro = callwrapper_getattro;
  t->tp_setattro = callwrapper_setattro;
  t->tp_traverse = callwrapper_traverse;
  t->tp_clear = callwrapper_clear;
  t->tp_doc = "rlscope call wrapper: records the call (outermost per category) and "
              "forwards it to __wrapped__.";
  t->tp_methods = callwrapper_methods;
  t->tp_members = callwrapper_members;
  t->tp_getset = callwrapper_getset;
}

// wrap(func, category, name) -> CallWrapper or MethodCallWrapper
PyObject* py_wrap(PyObject*, PyObject* args) {
  PyObject *func, *name, *nonblocking = Py_None;
  unsigned int category;
  if (!PyArg_ParseTuple(args, "OIU|O:wrap", &func, &category, &name, &nonblocking)) {
    return nullptr;
  }
  Py_ssize_t nb_pos = -1;
  PyObject* nb_kw = Py_None;
  long nb_mask = 0;
  if (nonblocking != Py_None &&
      (!PyArg_ParseTuple(nonblocking, "nOl:wrap nonblocking", &nb_pos, &nb_kw, &nb_mask) ||
       nb_pos < 0 || (nb_kw != Py_None && !PyUnicode_Check(nb_kw)))) {
    if (!PyErr_Occurred()) {
      PyErr_SetString(PyExc_TypeError,
                      "wrap(): nonblocking is (position >= 0, keyword str or None, mask)");
    }
    return nullptr;
  }
  if (!PyCallable_Check(func)) {
    PyErr_Format(PyExc_TypeError, "wrap(): %.100s object is not callable",
                 Py_TYPE(func)->tp_name);
    return nullptr;
  }
  if (category >= rlscope::kCallCategories) {
    PyErr_Format(PyExc_ValueError, "wrap(): category must be 0 (backend), 1 (simulator), "
                 "2 (wait) or 3 (mark), not %u", category);
    return nullptr;
  }
  Py_ssize_t len;
  const char* utf8 = PyUnicode_AsUTF8AndSize(name, &len);
  if (!utf8) return nullptr;
  bool method = Py_TYPE(func)->tp_descr_get != nullptr;
  auto* w = PyObject_GC_New(CallWrapperObject, method ? &MethodCallWrapperType : &CallWrapperType);
  if (!w) return nullptr;
  w->vectorcall = callwrapper_vectorcall;
  Py_INCREF(func);
  w->wrapped = func;
  Py_INCREF(name);
  w->name = name;
  w->weakrefs = nullptr;
  w->category = category;
  w->name_id = rlscope::intern(std::string_view(utf8, size_t(len)));
  w->nb_pos = nb_pos;
  w->nb_kw = nb_kw == Py_None ? nullptr : Py_NewRef(nb_kw);
  w->nb_mask = nb_mask;
  PyObject_GC_Track(reinterpret_cast<PyObject*>(w));
  return reinterpret_cast<PyObject*>(w);
}

// The calling thread's waits are a library's plumbing (a pool's handler threads, a
// queue's feeder thread): none is recorded from now on, in any recording of this
// process. The wait category's in-call flag is set for good, as inside an outermost wait.
PyObject* py_quiet_waits(PyObject*, PyObject*) {
  thread_state()->in_call[rlscope::CALL_WAIT] = 1;
  Py_RETURN_NONE;
}

PyObject* py_in_operation(PyObject*, PyObject* name) {
  if (!rlscope::is_active()) Py_RETURN_FALSE;
  ThreadState* t = rlscope::tls_thread;
  if (!t) Py_RETURN_FALSE;
  PyObject* scope = get_scope(rlscope::OPERATION_BEGIN, name);
  if (!scope) return nullptr;
  uint32_t id = reinterpret_cast<ScopeObject*>(scope)->name_id;
  Py_DECREF(scope);
  if (t->session != rlscope::g_hot.session.load(std::memory_order_acquire)) Py_RETURN_FALSE;
  for (uint32_t i = 0; i < t->depth; ++i) {
    if (t->stack[i].kind == rlscope::OPERATION_BEGIN && t->stack[i].name == id) Py_RETURN_TRUE;
  }
  Py_RETURN_FALSE;
}

// Attributes of a forwarding wrapper: its own names (`own`), then those set on it
// (`dict`, may be null), then the wrapped object's (as functools.wraps would show them).
PyObject* forward_getattr(PyObject* self, PyObject* own, PyObject* dict, PyObject* wrapped,
                          PyObject* name) {
  int is_own = PySet_Contains(own, name);
  if (is_own < 0) return nullptr;
  if (is_own) return PyObject_GenericGetAttr(self, name);
  if (dict) {
    PyObject* v = PyDict_GetItemWithError(dict, name);
    if (v) return Py_NewRef(v);
    if (PyErr_Occurred()) return nullptr;
  }
  return PyObject_GetAttr(wrapped, name);
}

// Setting one: its own names are read-only; anything else goes to `*dict` (made on first
// use), never to the wrapped object.
int forward_setattr(PyObject* self, PyObject* own, PyObject** dict, PyObject* name,
                    PyObject* value) {
  int is_own = PySet_Contains(own, name);
  if (is_own < 0) return -1;
  if (is_own) return PyObject_GenericSetAttr(self, name, value);  // read-only: raises
  if (!*dict && !(*dict = PyDict_New())) return -1;
  if (value) return PyDict_SetItem(*dict, name, value);
  if (PyDict_DelItem(*dict, name) < 0) {
    PyErr_Format(PyExc_AttributeError, "%U", name);
    return -1;
  }
  return 0;
}

// Opens operation `op` on `t` unless one of that name is open there; whether it did.
// `open`, if given, is set when one was open (the call is passed on inside it).
bool push_unless_open(ThreadState* t, uint32_t op, bool* open = nullptr) {
  if (!rlscope::begin_event(t)) return false;
  for (uint32_t i = 0; i < t->depth; ++i) {
    if (t->stack[i].kind == rlscope::OPERATION_BEGIN && t->stack[i].name == op) {
      if (open) *open = true;
      return false;
    }
  }
  return rlscope::push(t, rlscope::OPERATION_BEGIN, op) == rlscope::OK;
}

// Closes what push_unless_open opened, with any scope left open inside it.
void pop_pushed(ThreadState* t, uint32_t op) {
  if (rlscope::exit_innermost(t, rlscope::OPERATION_BEGIN, op) == rlscope::NOT_ON_STACK) {
    // Scopes left open inside the call (or a recording restarted in it): closed with it.
    std::vector<rlscope::StackEntry> unwound;
    rlscope::exit_scope_slow(t, rlscope::OPERATION_BEGIN, op, &unwound);
  }
}

// ------------------------------------------------------------------ OpWrapper
// A transparent callable that runs its function inside an operation unless one of that
// name is open on the thread (the integrations' zero-code operations: a vector env's
// step, a policy's forward). The Python twin is rlscope.integrations.marked; this one
// costs no Python frame per call (an EnvPool step went through three Python wrappers,
// ~20k instructions). Optionally, per instance (args[0]), a first-use callback runs
// once while recording: it must set `key` in the instance's __dict__.

struct OpWrapperObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* wrapped;
  PyObject* name;       // the operation (str)
  PyObject* first_use;  // callable(self) or nullptr
  PyObject* key;        // str: set in self.__dict__ once seen, or nullptr
  PyObject* dict;       // attributes set on the wrapper (never on the wrapped function)
  PyObject* weakrefs;
  uint32_t name_id;
  // Calls passed on while recording because the operation was open on the thread (a
  // marked env's step inside the user's own `simulation`): each costs this wrapper's
  // call and nothing is recorded, so the correction prices them from this count
  // (rlscope.intercept.passed_calls reads and clears it; incremented under the GIL).
  unsigned long long passed;
};

// Whether `self` needs its first-use callback (not seen yet); -1 on error.
int needs_first_use(OpWrapperObject* w, PyObject* self) {
  PyObject** dp = _PyObject_GetDictPtr(self);
  if (dp == nullptr) return 0;  // no instance dict: nothing can mark it, never call
  if (*dp == nullptr) return 1;
  PyObject* hit = PyDict_GetItemWithError(*dp, w->key);
  if (hit) return 0;
  return PyErr_Occurred() ? -1 : 1;
}

PyObject* opwrapper_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                               PyObject* kwnames) {
  auto* w = reinterpret_cast<OpWrapperObject*>(self);
  if (rlscope::g_hot.session.load(std::memory_order_relaxed) == 0) {
    return PyObject_Vectorcall(w->wrapped, args, nargsf, kwnames);
  }
  if (w->first_use && PyVectorcall_NARGS(nargsf) > 0) {
    int need = needs_first_use(w, args[0]);
    if (need < 0) return nullptr;
    if (need) {
      PyObject* r = PyObject_CallOneArg(w->first_use, args[0]);
      if (!r) return nullptr;
      Py_DECREF(r);
    }
  }
  ThreadState* t = thread_state();
  bool open = false;
  bool pushed = push_unless_open(t, w->name_id, &open);
  if (open) ++w->passed;
  PyObject* r = PyObject_Vectorcall(w->wrapped, args, nargsf, kwnames);
  if (pushed) pop_pushed(t, w->name_id);
  return r;
}

int opwrapper_traverse(PyObject* self, visitproc visit, void* arg) {
  auto* w = reinterpret_cast<OpWrapperObject*>(self);
  Py_VISIT(w->wrapped);
  Py_VISIT(w->first_use);
  Py_VISIT(w->dict);
  return 0;
}

int opwrapper_clear(PyObject* self) {
  auto* w = reinterpret_cast<OpWrapperObject*>(self);
  Py_CLEAR(w->wrapped);
  Py_CLEAR(w->first_use);
  Py_CLEAR(w->dict);
  return 0;
}

void opwrapper_dealloc(PyObject* self) {
  auto* w = reinterpret_cast<OpWrapperObject*>(self);
  PyObject_GC_UnTrack(self);
  if (w->weakrefs) PyObject_ClearWeakRefs(self);
  Py_CLEAR(w->wrapped);
  Py_CLEAR(w->first_use);
  Py_CLEAR(w->dict);
  Py_CLEAR(w->name);
  Py_CLEAR(w->key);
  PyObject_GC_Del(self);
}

PyObject* g_opwrapper_own = nullptr;  // frozenset of attribute names the wrapper answers

// Its own attributes, then those set on it, then the wrapped function's (__name__,
// __doc__, __qualname__, __module__...), as functools.wraps would show them.
PyObject* opwrapper_getattro(PyObject* self, PyObject* name) {
  auto* w = reinterpret_cast<OpWrapperObject*>(self);
  return forward_getattr(self, g_opwrapper_own, w->dict, w->wrapped, name);
}

int opwrapper_setattro(PyObject* self, PyObject* name, PyObject* value) {
  auto* w = reinterpret_cast<OpWrapperObject*>(self);
  return forward_setattr(self, g_opwrapper_own, &w->dict, name, value);
}

PyObject* opwrapper_repr(PyObject* self) {
  return PyObject_Repr(reinterpret_cast<OpWrapperObject*>(self)->wrapped);
}

PyObject* opwrapper_reduce_ex(PyObject* self, PyObject* protocol) {
  return reduce_as(reinterpret_cast<OpWrapperObject*>(self)->wrapped, protocol);
}

PyMethodDef opwrapper_methods[] = {
    {"__reduce_ex__", opwrapper_reduce_ex, METH_O, "Pickle as the wrapped object."},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef opwrapper_members[] = {
    {"__wrapped__", T_OBJECT_EX, offsetof(OpWrapperObject, wrapped), READONLY,
     "the wrapped callable"},
    {"_rlscope_op", T_OBJECT_EX, offsetof(OpWrapperObject, name), READONLY,
     "the operation its calls run in"},
    {"_rlscope_passed", T_ULONGLONG, offsetof(OpWrapperObject, passed), 0,
     "calls passed on while recording, the operation open (settable: cleared)"},
    {nullptr, 0, 0, 0, nullptr},
};

PyTypeObject OpWrapperType = {PyVarObject_HEAD_INIT(nullptr, 0)};
PyTypeObject MethodOpWrapperType = {PyVarObject_HEAD_INIT(nullptr, 0)};

void init_opwrapper_type(PyTypeObject* t, const char* name, bool method) {
  init_forwarding_type(t, name, method, sizeof(OpWrapperObject),
                       offsetof(OpWrapperObject, vectorcall),
                       offsetof(OpWrapperObject, weakrefs));
  t->tp_dealloc = opwrapper_dealloc;
  t->tp_repr = opwrapper_repr;
  t->tp_getattro = opwrapper_getattro;
  t->tp_setattro = opwrapper_setattro;
  t->tp_traverse = opwrapper_traverse;
  t->tp_clear = opwrapper_clear;
  t->tp_doc = "rlscope operation wrapper: runs __wrapped__ inside the operation "
              "_rlscope_op unless one of that name is open on the thread.";
  t->tp_methods = opwrapper_methods;
  t->tp_members = opwrapper_members;
}

// wrap_operation(func, name, first_use=None, key=None) -> OpWrapper or MethodOpWrapper
PyObject* py_wrap_operation(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"func", "name", "first_use", "key", nullptr};
  PyObject *func, *name, *first_use = Py_None, *key = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OU|OO:wrap_operation",
                                   const_cast<char**>(kw), &func, &name, &first_use, &key)) {
    return nullptr;
  }
  if (!PyCallable_Check(func)) {
    PyErr_Format(PyExc_TypeError, "wrap_operation(): %.100s object is not callable",
                 Py_TYPE(func)->tp_name);
    return nullptr;
  }
  if ((first_use == Py_None) != (key == Py_None) ||
      (first_use != Py_None && (!PyCallable_Check(first_use) || !PyUnicode_Check(key)))) {
    PyErr_SetString(PyExc_TypeError,
                    "wrap_operation(): first_use (callable) and key (str) go together");
    return nullptr;
  }
  PyObject* scope = get_scope(rlscope::OPERATION_BEGIN, name);  // checks and interns
  if (!scope) return nullptr;
  uint32_t id = reinterpret_cast<ScopeObject*>(scope)->name_id;
  Py_DECREF(scope);
  bool method = Py_TYPE(func)->tp_descr_get != nullptr;
  auto* w = PyObject_GC_New(OpWrapperObject, method ? &MethodOpWrapperType : &OpWrapperType);
  if (!w) return nullptr;
  w->vectorcall = opwrapper_vectorcall;
  w->wrapped = Py_NewRef(func);
  w->name = Py_NewRef(name);
  w->first_use = first_use == Py_None ? nullptr : Py_NewRef(first_use);
  w->key = key == Py_None ? nullptr : Py_NewRef(key);
  w->dict = nullptr;
  w->weakrefs = nullptr;
  w->name_id = id;
  w->passed = 0;
  PyObject_GC_Track(reinterpret_cast<PyObject*>(w));
  return reinterpret_cast<PyObject*>(w);
}

// The id of `name` (a str). Interning takes a lock and hashes a copy, so ids are kept:
// the last str object (a vector env passes the same one at every step), then a dict of
// every env name seen (several vector envs stepped in turn). 0 with an error set.
uint32_t intern_str(PyObject* name) {
  static PyObject* last = nullptr;  // a strong reference: its address stays its own
  static uint32_t last_id = 0;
  static PyObject* ids = nullptr;  // str -> int
  if (name == last) return last_id;
  if (!PyUnicode_Check(name)) {
    PyErr_Format(PyExc_TypeError, "env name must be str, not %.100s", Py_TYPE(name)->tp_name);
    return 0;
  }
  if (!ids && !(ids = PyDict_New())) return 0;
  uint32_t id;
  PyObject* known = PyDict_GetItemWithError(ids, name);
  if (known) {
    id = uint32_t(PyLong_AsUnsignedLong(known));
  } else {
    if (PyErr_Occurred()) return 0;
    Py_ssize_t len;
    const char* utf8 = PyUnicode_AsUTF8AndSize(name, &len);
    if (!utf8) return 0;
    id = rlscope::intern(std::string_view(utf8, size_t(len)));
    PyObject* v = PyLong_FromUnsignedLong(id);
    if (!v || PyDict_SetItem(ids, name, v) < 0) {
      Py_XDECREF(v);
      return 0;
    }
    Py_DECREF(v);
  }
  Py_XSETREF(last, Py_NewRef(name));
  last_id = id;
  return id;
}

// ------------------------------------------------------------------ EnvCall
// An env's bound step (or reset) recorded as ENV_STEP (ENV_RESET) with the env's index,
// inside the `simulation` operation (opened unless open on the thread): what a vector
// env's envs get (rlscope.integrations.vecenv; the Python twin is its _Recorded). Names
// are interned once, here; the call costs no Python frame (the Python version cost
// ~9k instructions per env step, mostly two interned-name lookups and four calls).

struct EnvCallObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* wrapped;  // the bound method
  PyObject* weakrefs;
  int64_t index;
  uint32_t begin_kind;  // ENV_STEP_BEGIN or ENV_RESET_BEGIN
  uint32_t name_id;     // the env's name
  uint32_t op_id;       // "simulation"
};

PyObject* envcall_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                             PyObject* kwnames) {
  auto* w = reinterpret_cast<EnvCallObject*>(self);
  if (!rlscope::is_active()) return PyObject_Vectorcall(w->wrapped, args, nargsf, kwnames);
  ThreadState* t = thread_state();
  rlscope::env_begin(t, w->begin_kind, w->name_id, w->index);
  bool pushed = push_unless_open(t, w->op_id);
  PyObject* r = PyObject_Vectorcall(w->wrapped, args, nargsf, kwnames);
  if (pushed) pop_pushed(t, w->op_id);
  rlscope::env_end(t, w->begin_kind, w->name_id);
  return r;
}

int envcall_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(reinterpret_cast<EnvCallObject*>(self)->wrapped);
  return 0;
}

int envcall_clear(PyObject* self) {
  Py_CLEAR(reinterpret_cast<EnvCallObject*>(self)->wrapped);
  return 0;
}

void envcall_dealloc(PyObject* self) {
  auto* w = reinterpret_cast<EnvCallObject*>(self);
  PyObject_GC_UnTrack(self);
  if (w->weakrefs) PyObject_ClearWeakRefs(self);
  Py_CLEAR(w->wrapped);
  PyObject_GC_Del(self);
}

PyObject* g_envcall_own = nullptr;  // frozenset of attribute names the object answers

// Its own attributes, then the bound method's (__self__, __name__, __func__...).
PyObject* envcall_getattro(PyObject* self, PyObject* name) {
  return forward_getattr(self, g_envcall_own, nullptr,
                         reinterpret_cast<EnvCallObject*>(self)->wrapped, name);
}

PyObject* envcall_repr(PyObject* self) {
  return PyObject_Repr(reinterpret_cast<EnvCallObject*>(self)->wrapped);
}

// Pickled (or copied) as the plain bound method: an env copied or sent elsewhere gets
// its method back, unrecorded.
PyObject* envcall_reduce_ex(PyObject* self, PyObject* protocol) {
  return reduce_as(reinterpret_cast<EnvCallObject*>(self)->wrapped, protocol);
}

PyMethodDef envcall_methods[] = {
    {"__reduce_ex__", envcall_reduce_ex, METH_O, "Pickle as the wrapped method."},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef envcall_members[] = {
    {"__wrapped__", T_OBJECT_EX, offsetof(EnvCallObject, wrapped), READONLY,
     "the recorded bound method"},
    {"index", T_LONGLONG, offsetof(EnvCallObject, index), READONLY, "the env's index"},
    {nullptr, 0, 0, 0, nullptr},
};

PyObject* envcall_marker(PyObject*, void*) { Py_RETURN_TRUE; }

PyGetSetDef envcall_getset[] = {
    {"_rlscope_env", envcall_marker, nullptr, "rlscope's env call (on the type too)", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyTypeObject EnvCallType = {PyVarObject_HEAD_INIT(nullptr, 0)};

void init_envcall_type() {
  init_forwarding_type(&EnvCallType, "rlscope._native.EnvCall", false, sizeof(EnvCallObject),
                       offsetof(EnvCallObject, vectorcall),
                       offsetof(EnvCallObject, weakrefs));
  EnvCallType.tp_dealloc = envcall_dealloc;
  EnvCallType.tp_repr = envcall_repr;
  EnvCallType.tp_getattro = envcall_getattro;
  EnvCallType.tp_traverse = envcall_traverse;
  EnvCallType.tp_clear = envcall_clear;
  EnvCallType.tp_doc = "rlscope env call: records each call of __wrapped__ as an env step "
                       "(or reset) of env `index`, inside the simulation operation.";
  EnvCallType.tp_methods = envcall_methods;
  EnvCallType.tp_members = envcall_members;
  EnvCallType.tp_getset = envcall_getset;
}

// env_call(method, reset, index, name, operation) -> EnvCall
PyObject* py_env_call(PyObject*, PyObject* args) {
  PyObject* method;
  int reset;
  long long index;
  const char *name, *op;
  Py_ssize_t name_len, op_len;
  if (!PyArg_ParseTuple(args, "OpLs#s#:env_call", &method, &reset, &index, &name, &name_len,
                        &op, &op_len)) {
    return nullptr;
  }
  if (!PyCallable_Check(method)) {
    PyErr_Format(PyExc_TypeError, "env_call(): %.100s object is not callable",
                 Py_TYPE(method)->tp_name);
    return nullptr;
  }
  auto* w = PyObject_GC_New(EnvCallObject, &EnvCallType);
  if (!w) return nullptr;
  w->vectorcall = envcall_vectorcall;
  w->wrapped = Py_NewRef(method);
  w->weakrefs = nullptr;
  w->index = index;
  w->begin_kind = reset ? rlscope::ENV_RESET_BEGIN : rlscope::ENV_STEP_BEGIN;
  w->name_id = rlscope::intern(std::string_view(name, size_t(name_len)));
  w->op_id = rlscope::intern(std::string_view(op, size_t(op_len)));
  PyObject_GC_Track(reinterpret_cast<PyObject*>(w));
  return reinterpret_cast<PyObject*>(w);
}

// ------------------------------------------------------------------ VecStep
// A vector env class's step (or reset) method recorded as one ENV_STEP (ENV_RESET) pair
// with index -1, named after the vector env, per call on a vector env rlscope knows
// (`vecs`: id(vector env) -> rlscope.integrations.vecenv._Vec, whose `name` and
// `sampled` it reads); a sampled call has the _Sampled's stand-ins in place for that
// call (its start(now) / stop()). Parts: whole (a step in one method), begin (the
// send half: the pair is opened, and closed here only if sending fails), end (the wait
// half, possibly a wait-call wrapper: sampling, and the pair closed). The Python twins
// are vecenv's _whole/_begins/_ends; this one costs no Python frame per vector step.

enum VecPart { VEC_WHOLE = 0, VEC_BEGIN = 1, VEC_END = 2 };

struct VecStepObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* wrapped;
  PyObject* vecs;  // dict
  PyObject* dict;  // attributes set on the wrapper (a patch flag)
  PyObject* weakrefs;
  int part;
  uint32_t begin_kind;  // ENV_STEP_BEGIN or ENV_RESET_BEGIN
  // The vector env last called (a loop steps one): weak references to it, its _Vec and,
  // for the parts that sample, its _Sampled (weak: a wrapper lives as long as its class,
  // and must not keep a closed vector env's envs alive), its name's id, sampling interval
  // and when its next call is due (perf_counter_ns). A hit costs no dict lookup, no int
  // made and no attribute read: ~2k instructions per vector step of a DummyVecEnv.
  PyObject* seen_ref;
  PyObject* seen_vec;
  PyObject* seen_smp;
  uint32_t seen_name;
  long long seen_interval;
  long long seen_due;
};

PyObject* g_str_name = nullptr;
PyObject* g_str_sampled = nullptr;
PyObject* g_str_last = nullptr;
PyObject* g_str_interval = nullptr;
PyObject* g_str_start = nullptr;
PyObject* g_str_stop = nullptr;

// A long attribute of `o`; -1 with an error set on failure.
int attr_ll(PyObject* o, PyObject* name, long long* out) {
  PyObject* v = PyObject_GetAttr(o, name);
  if (!v) return -1;
  *out = PyLong_AsLongLong(v);
  Py_DECREF(v);
  return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

// The object a weak reference points to (borrowed; Py_None once it is gone).
PyObject* weak_target(PyObject* ref) {
#if PY_VERSION_HEX >= 0x030D0000
  PyObject* o = nullptr;
  if (PyWeakref_GetRef(ref, &o) < 0) {
    PyErr_Clear();
    return Py_None;
  }
  if (!o) return Py_None;
  Py_DECREF(o);  // alive: the caller holds it (it is args[0])
  return o;
#else
  return PyWeakref_GET_OBJECT(ref);
#endif
}

// What a vector step needs of its vector env (new references: the sampler's Python code
// could replace the wrapper's cache); `cached`: from the cache, which keeps its clock.
struct VecTarget {
  PyObject* vec = nullptr;
  PyObject* smp = nullptr;  // its _Sampled (the sampling parts), or nullptr
  uint32_t name = 0;
  long long interval = 0, due = 0;
  bool cached = false;
  void release() {
    Py_CLEAR(vec);
    Py_CLEAR(smp);
  }
};

// Fills `t` for vector env `self`: 1 found, 0 not one of ours, -1 error.
int vec_target(VecStepObject* w, PyObject* self, VecTarget* t) {
  if (w->seen_ref && weak_target(w->seen_ref) == self) {
    // The env alive, so are its _Vec and _Sampled (vecenv drops them when it goes).
    PyObject* vec = weak_target(w->seen_vec);
    PyObject* smp = w->seen_smp ? weak_target(w->seen_smp) : nullptr;
    if (vec != Py_None && smp != Py_None) {
      *t = VecTarget{Py_NewRef(vec), Py_XNewRef(smp), w->seen_name, w->seen_interval,
                     w->seen_due, true};
      return 1;
    }
  }
  PyObject* key = PyLong_FromVoidPtr(self);  // id(vector env)
  if (!key) return -1;
  PyObject* vec = PyDict_GetItemWithError(w->vecs, key);
  Py_DECREF(key);
  if (!vec) return PyErr_Occurred() ? -1 : 0;
  PyObject* name = PyObject_GetAttr(vec, g_str_name);
  uint32_t id = name ? intern_str(name) : 0;
  Py_XDECREF(name);
  if (id == 0) return -1;
  PyObject* smp = nullptr;
  long long last = 0, interval = 0;
  if (w->part != VEC_BEGIN) {
    smp = PyObject_GetAttr(vec, g_str_sampled);
    if (!smp) return -1;
    if (smp == Py_None) {
      Py_CLEAR(smp);
    } else if (attr_ll(smp, g_str_last, &last) < 0 ||
               attr_ll(smp, g_str_interval, &interval) < 0) {
      Py_DECREF(smp);
      return -1;
    }
  }
  *t = VecTarget{Py_NewRef(vec), smp, id, interval, last + interval, false};
  // Cached only once what the call needs is set (a vector env's _Sampled is set after
  // its __init__): the send part always, the others when they sample.
  if (w->part != VEC_BEGIN && !smp) return 1;
  PyObject* ref = PyWeakref_NewRef(self, nullptr);
  PyObject* vec_ref = ref ? PyWeakref_NewRef(t->vec, nullptr) : nullptr;
  PyObject* smp_ref = vec_ref && t->smp ? PyWeakref_NewRef(t->smp, nullptr) : nullptr;
  if (!vec_ref || (t->smp && !smp_ref)) {  // not weak-referenceable: looked up every call
    PyErr_Clear();
    Py_XDECREF(ref);
    Py_XDECREF(vec_ref);
    return 1;
  }
  Py_XSETREF(w->seen_ref, ref);
  Py_XSETREF(w->seen_vec, vec_ref);
  Py_XSETREF(w->seen_smp, smp_ref);
  w->seen_name = id;
  w->seen_interval = interval;
  w->seen_due = t->due;
  t->cached = true;
  return 1;
}

// Whether this call is sampled (its stand-ins then in place until stop()): 1 yes, 0 no,
// -1 error. The sampler's start(now) records when (its `last`: the Python twin's clock).
int sample_if_due(VecStepObject* w, VecTarget* t) {
  if (!t->smp) return 0;
  long long now = static_cast<long long>(rlscope::monotonic_ns());  // = perf_counter_ns
  if (now < t->due) return 0;
  if (t->cached) w->seen_due = now + t->interval;
  PyObject* now_obj = PyLong_FromLongLong(now);
  PyObject* started = now_obj ? PyObject_CallMethodOneArg(t->smp, g_str_start, now_obj) : nullptr;
  Py_XDECREF(now_obj);
  int yes = started ? PyObject_IsTrue(started) : -1;
  Py_XDECREF(started);
  return yes;
}

PyObject* vecstep_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                             PyObject* kwnames) {
  auto* w = reinterpret_cast<VecStepObject*>(self);
  if (!rlscope::is_active() || PyVectorcall_NARGS(nargsf) < 1) {
    return PyObject_Vectorcall(w->wrapped, args, nargsf, kwnames);
  }
  VecTarget t;
  int found = vec_target(w, args[0], &t);
  if (found < 0) return nullptr;
  if (found == 0) return PyObject_Vectorcall(w->wrapped, args, nargsf, kwnames);  // not ours
  uint32_t id = t.name;
  ThreadState* t_state = thread_state();
  if (w->part != VEC_END) rlscope::env_begin(t_state, w->begin_kind, id, -1);
  PyObject* smp = nullptr;  // a new reference while this call is sampled
  if (w->part != VEC_BEGIN) {
    int due = sample_if_due(w, &t);
    if (due < 0) {  // the pair (opened here or by the send) is closed
      t.release();
      rlscope::env_end(t_state, w->begin_kind, id);
      return nullptr;
    }
    if (due) smp = Py_NewRef(t.smp);
  }
  t.release();
  PyObject* r = PyObject_Vectorcall(w->wrapped, args, nargsf, kwnames);
  if (w->part == VEC_BEGIN) {
    if (!r) rlscope::env_end(t_state, w->begin_kind, id);  // nothing sent: no wait will close it
    return r;
  }
  if (smp) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);  // the call's error, if any, survives stop()
    PyObject* done = PyObject_CallMethodNoArgs(smp, g_str_stop);
    Py_DECREF(smp);
    if (done) {
      Py_DECREF(done);
      PyErr_Restore(et, ev, tb);
    } else if (et) {
      PyErr_Clear();
      PyErr_Restore(et, ev, tb);
    } else {
      Py_CLEAR(r);  // stop() failed after a good call: its error is the result
    }
  }
  rlscope::env_end(t_state, w->begin_kind, id);
  return r;
}

int vecstep_traverse(PyObject* self, visitproc visit, void* arg) {
  auto* w = reinterpret_cast<VecStepObject*>(self);
  Py_VISIT(w->wrapped);
  Py_VISIT(w->vecs);
  Py_VISIT(w->dict);
  Py_VISIT(w->seen_ref);
  Py_VISIT(w->seen_vec);
  Py_VISIT(w->seen_smp);
  return 0;
}

int vecstep_clear(PyObject* self) {
  auto* w = reinterpret_cast<VecStepObject*>(self);
  Py_CLEAR(w->wrapped);
  Py_CLEAR(w->vecs);
  Py_CLEAR(w->dict);
  Py_CLEAR(w->seen_ref);
  Py_CLEAR(w->seen_vec);
  Py_CLEAR(w->seen_smp);
  return 0;
}

void vecstep_dealloc(PyObject* self) {
  auto* w = reinterpret_cast<VecStepObject*>(self);
  PyObject_GC_UnTrack(self);
  if (w->weakrefs) PyObject_ClearWeakRefs(self);
  vecstep_clear(self);
  PyObject_GC_Del(self);
}

PyObject* g_vecstep_own = nullptr;  // frozenset of attribute names the wrapper answers

// Its own attributes, then those set on it (the patch flag), then the wrapped method's.
PyObject* vecstep_getattro(PyObject* self, PyObject* name) {
  auto* w = reinterpret_cast<VecStepObject*>(self);
  return forward_getattr(self, g_vecstep_own, w->dict, w->wrapped, name);
}

int vecstep_setattro(PyObject* self, PyObject* name, PyObject* value) {
  auto* w = reinterpret_cast<VecStepObject*>(self);
  return forward_setattr(self, g_vecstep_own, &w->dict, name, value);
}

PyObject* vecstep_repr(PyObject* self) {
  return PyObject_Repr(reinterpret_cast<VecStepObject*>(self)->wrapped);
}

PyObject* vecstep_reduce_ex(PyObject* self, PyObject* protocol) {
  return reduce_as(reinterpret_cast<VecStepObject*>(self)->wrapped, protocol);
}

PyMethodDef vecstep_methods[] = {
    {"__reduce_ex__", vecstep_reduce_ex, METH_O, "Pickle as the wrapped method."},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef vecstep_members[] = {
    {"__wrapped__", T_OBJECT_EX, offsetof(VecStepObject, wrapped), READONLY,
     "the wrapped method"},
    {nullptr, 0, 0, 0, nullptr},
};

PyTypeObject VecStepType = {PyVarObject_HEAD_INIT(nullptr, 0)};

void init_vecstep_type() {
  init_forwarding_type(&VecStepType, "rlscope._native.VecStep", true, sizeof(VecStepObject),
                       offsetof(VecStepObject, vectorcall),
                       offsetof(VecStepObject, weakrefs));
  VecStepType.tp_dealloc = vecstep_dealloc;
  VecStepType.tp_repr = vecstep_repr;
  VecStepType.tp_getattro = vecstep_getattro;
  VecStepType.tp_setattro = vecstep_setattro;
  VecStepType.tp_traverse = vecstep_traverse;
  VecStepType.tp_clear = vecstep_clear;
  VecStepType.tp_doc = "rlscope vector step: records each call on a known vector env as "
                       "one vector-level env step (or reset) and forwards it to __wrapped__.";
  VecStepType.tp_methods = vecstep_methods;
  VecStepType.tp_members = vecstep_members;
}

// vec_step(method, reset, part, vecs) -> VecStep
PyObject* py_vec_step(PyObject*, PyObject* args) {
  PyObject *method, *vecs;
  int reset, part;
  if (!PyArg_ParseTuple(args, "OpiO!:vec_step", &method, &reset, &part, &PyDict_Type, &vecs)) {
    return nullptr;
  }
  if (!PyCallable_Check(method)) {
    PyErr_Format(PyExc_TypeError, "vec_step(): %.100s object is not callable",
                 Py_TYPE(method)->tp_name);
    return nullptr;
  }
  if (part < VEC_WHOLE || part > VEC_END) {
    PyErr_Format(PyExc_ValueError, "vec_step(): part must be 0, 1 or 2, not %d", part);
    return nullptr;
  }
  auto* w = PyObject_GC_New(VecStepObject, &VecStepType);
  if (!w) return nullptr;
  w->vectorcall = vecstep_vectorcall;
  w->wrapped = Py_NewRef(method);
  w->vecs = Py_NewRef(vecs);
  w->dict = nullptr;
  w->weakrefs = nullptr;
  w->part = part;
  w->begin_kind = reset ? rlscope::ENV_RESET_BEGIN : rlscope::ENV_STEP_BEGIN;
  w->seen_ref = w->seen_vec = w->seen_smp = nullptr;
  w->seen_name = 0;
  w->seen_interval = w->seen_due = 0;
  PyObject_GC_Track(reinterpret_cast<PyObject*>(w));
  return reinterpret_cast<PyObject*>(w);
}

// ------------------------------------------------------------------ functions

PyObject* py_configure(PyObject*, PyObject* args) {
  PyObject *etype, *decorate;
  if (!PyArg_ParseTuple(args, "OO:configure", &etype, &decorate)) return nullptr;
  if (!PyExceptionClass_Check(etype)) {
    PyErr_SetString(PyExc_TypeError, "configure(): error_type must be an exception class");
    return nullptr;
  }
  if (!PyCallable_Check(decorate)) {
    PyErr_SetString(PyExc_TypeError, "configure(): decorate must be callable");
    return nullptr;
  }
  Py_INCREF(etype);
  Py_XSETREF(g_error_type, etype);
  Py_INCREF(decorate);
  Py_XSETREF(g_decorate, decorate);
  Py_RETURN_NONE;
}

bool to_string_list(PyObject* seq, std::vector<std::string>* out) {
  PyObject* fast = PySequence_Fast(seq, "argv must be a list of str");
  if (!fast) return false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(fast, i);
    if (!PyUnicode_Check(item)) {
      PyErr_SetString(PyExc_TypeError, "argv must be a list of str");
      Py_DECREF(fast);
      return false;
    }
    Py_ssize_t len;
    const char* s = PyUnicode_AsUTF8AndSize(item, &len);
    if (!s) {
      Py_DECREF(fast);
      return false;
    }
    out->emplace_back(s, size_t(len));
  }
  Py_DECREF(fast);
  return true;
}

PyObject* py_start(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"path",      "argv",           "process_name",
                                 "rlscope_version", "flush_interval_s", "max_buffer_bytes",
                                 nullptr};
  PyObject* path_bytes = nullptr;
  PyObject* argv;
  const char* process_name;
  const char* version;
  double flush_interval = 0.5;
  long long max_bytes = 256ll << 20;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&Oss|dL:start",
                                   const_cast<char**>(kwlist), PyUnicode_FSConverter,
                                   &path_bytes, &argv, &process_name, &version,
                                   &flush_interval, &max_bytes)) {
    return nullptr;
  }
  rlscope::Config cfg;
  cfg.path = PyBytes_AS_STRING(path_bytes);
  Py_DECREF(path_bytes);
  if (!to_string_list(argv, &cfg.argv)) return nullptr;
  if (!(flush_interval > 0)) {
    PyErr_SetString(PyExc_ValueError, "start(): flush_interval_s must be > 0");
    return nullptr;
  }
  if (max_bytes <= 0) {
    PyErr_SetString(PyExc_ValueError, "start(): max_buffer_bytes must be > 0");
    return nullptr;
  }
  cfg.process_name = process_name;
  cfg.rlscope_version = version;
  cfg.flush_interval_s = flush_interval;
  cfg.max_buffer_bytes = uint64_t(max_bytes);
  ThreadState* t = thread_state();
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = rlscope::start(cfg, t);
  Py_END_ALLOW_THREADS
  if (rc == -1) {
    std::string cur = rlscope::current_path();
    PyErr_Format(error_type(),
                 "a recording is already active (writing '%s'); call stop() before "
                 "starting another",
                 cur.c_str());
    return nullptr;
  }
  if (rc != 0) {
    PyErr_Format(error_type(), "cannot create trace file '%s': %s; choose a new path in a "
                 "writable directory (existing files are never overwritten)",
                 cfg.path.c_str(), strerror(rc));
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* py_stop(PyObject*, PyObject*) {
  if (!rlscope::is_active()) Py_RETURN_NONE;
  ThreadState* t = thread_state();
  std::string path = rlscope::current_path();
  Py_BEGIN_ALLOW_THREADS
  rlscope::stop(t);
  Py_END_ALLOW_THREADS
  int err = rlscope::write_error();
  if (err) {
    PyErr_Format(error_type(), "writing trace file '%s' failed: %s; the trace is incomplete",
                 path.c_str(), strerror(err));
    return nullptr;
  }
  Py_RETURN_NONE;
}

// set_call_mask(mask) -> previous mask: bit c on records calls of category c.
PyObject* py_set_call_mask(PyObject*, PyObject* arg) {
  unsigned long mask = PyLong_AsUnsignedLong(arg);
  if (mask == static_cast<unsigned long>(-1) && PyErr_Occurred()) return nullptr;
  return PyLong_FromUnsignedLong(
      rlscope::g_hot.call_mask.exchange(static_cast<uint32_t>(mask), std::memory_order_relaxed));
}

// install_pause_handler() -> bool; pause_gaps() -> [(stop_ns, resume_ns), ...]
PyObject* py_install_pause_handler(PyObject*, PyObject*) {
  return PyBool_FromLong(rlscope::install_pause_handler());
}

PyObject* py_pause_gaps(PyObject*, PyObject*) {
  std::vector<uint64_t> buf(2 * (size_t{1} << 16));
  size_t n = rlscope::pause_gaps(buf.data(), buf.size() / 2);
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(n));
  if (!list) return nullptr;
  for (size_t i = 0; i < n; ++i) {
    PyObject* pair = Py_BuildValue("(KK)", static_cast<unsigned long long>(buf[2 * i]),
                                   static_cast<unsigned long long>(buf[2 * i + 1]));
    if (!pair) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), pair);
  }
  return list;
}

PyObject* py_is_active(PyObject*, PyObject*) { return PyBool_FromLong(rlscope::is_active()); }

PyObject* py_flush(PyObject*, PyObject*) {
  Py_BEGIN_ALLOW_THREADS
  rlscope::flush();
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

// Runs on whichever thread ends the process, without the GIL: the core alone.
void stop_at_library_exit() {
  rlscope::stop(rlscope::current_thread(), /*process_ends=*/true);
}

// watch_sigterm() -> int (0 or an errno); sigterm_answered(): see term_watch.h.
PyObject* py_watch_sigterm(PyObject*, PyObject*) {
  return PyLong_FromLong(rlscope::watch_sigterm());
}

PyObject* py_sigterm_answered(PyObject*, PyObject*) {
  rlscope::sigterm_answered();
  Py_RETURN_NONE;
}

PyObject* py_hook_exit_calls(PyObject*, PyObject* arg) {
  const char* sub = PyUnicode_AsUTF8(arg);
  if (!sub) return nullptr;
  int n = rlscope::hook_exit_calls(sub, stop_at_library_exit);
  if (n < 0) {
    PyErr_SetString(PyExc_ValueError, "hook_exit_calls: empty library name");
    return nullptr;
  }
  return PyLong_FromLong(n);
}

PyObject* py_operation(PyObject*, PyObject* name) {
  return get_scope(rlscope::OPERATION_BEGIN, name);
}

PyObject* py_phase(PyObject*, PyObject* name) { return get_scope(rlscope::PHASE_BEGIN, name); }

PyObject* py_push_operation(PyObject*, PyObject* name) {
  PyObject* scope = get_scope(rlscope::OPERATION_BEGIN, name);
  if (!scope) return nullptr;
  PyObject* r = scope_enter(scope, nullptr);
  Py_DECREF(scope);
  if (!r) return nullptr;
  Py_DECREF(r);
  Py_RETURN_NONE;
}

PyObject* py_pop_operation(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"name", nullptr};
  PyObject* name = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:pop_operation",
                                   const_cast<char**>(kwlist), &name)) {
    return nullptr;
  }
  if (!rlscope::is_active()) Py_RETURN_NONE;
  uint32_t id = 0;
  if (name != Py_None) {
    PyObject* scope = get_scope(rlscope::OPERATION_BEGIN, name);
    if (!scope) return nullptr;
    id = reinterpret_cast<ScopeObject*>(scope)->name_id;
    Py_DECREF(scope);
  }
  ThreadState* t = thread_state();
  Status st = rlscope::pop(t, rlscope::OPERATION_BEGIN, id);
  if (st == rlscope::STACK_EMPTY) {
    PyErr_SetString(error_type(),
                    "pop_operation() without a matching push_operation() on this thread; "
                    "every pop_operation() needs an earlier push_operation() on the same "
                    "thread");
    return nullptr;
  }
  if (st == rlscope::MISMATCH) {
    std::vector<rlscope::StackEntry> open = rlscope::open_scopes(t);  // unchanged by pop
    std::string wanted = name == Py_None ? std::string("pop_operation()")
                                         : "pop_operation('" +
                                               std::string(PyUnicode_AsUTF8(name)) + "')";
    PyErr_Format(error_type(),
                 "%s does not match the innermost open scope, %s (open on this thread, "
                 "outermost first: %s); pop scopes in reverse order of push",
                 wanted.c_str(), describe(open.back()).c_str(), describe_stack(open).c_str());
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* py_progress(PyObject*, PyObject* args) {
  long long timesteps, total;
  if (!PyArg_ParseTuple(args, "LL:progress", &timesteps, &total)) return nullptr;
  if (!rlscope::is_active()) Py_RETURN_NONE;
  rlscope::progress(thread_state(), timesteps, total);
  Py_RETURN_NONE;
}

// env_begin(reset, index, name) / env_end(reset, name): one step (or reset) of env
// `index` of a vector env, recorded by rlscope.integrations.vecenv.
// env_begin(reset, index, name): METH_FASTCALL, called at every vector step.
PyObject* py_env_begin(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_Format(PyExc_TypeError, "env_begin() takes 3 arguments (%zd given)", nargs);
    return nullptr;
  }
  int reset = PyObject_IsTrue(args[0]);
  if (reset < 0) return nullptr;
  long long index = PyLong_AsLongLong(args[1]);
  if (index == -1 && PyErr_Occurred()) return nullptr;
  if (!rlscope::is_active()) {
    if (!PyUnicode_Check(args[2])) return PyErr_Format(PyExc_TypeError, "env name must be str");
    Py_RETURN_NONE;
  }
  uint32_t id = intern_str(args[2]);
  if (id == 0 && PyErr_Occurred()) return nullptr;
  rlscope::env_begin(thread_state(), reset ? rlscope::ENV_RESET_BEGIN : rlscope::ENV_STEP_BEGIN,
                     id, index);
  Py_RETURN_NONE;
}

// env_end(reset, name): METH_FASTCALL.
PyObject* py_env_end(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_Format(PyExc_TypeError, "env_end() takes 2 arguments (%zd given)", nargs);
    return nullptr;
  }
  int reset = PyObject_IsTrue(args[0]);
  if (reset < 0) return nullptr;
  if (!rlscope::is_active()) {
    if (!PyUnicode_Check(args[1])) return PyErr_Format(PyExc_TypeError, "env name must be str");
    Py_RETURN_NONE;
  }
  uint32_t id = intern_str(args[1]);
  if (id == 0 && PyErr_Occurred()) return nullptr;
  rlscope::env_end(thread_state(), reset ? rlscope::ENV_RESET_BEGIN : rlscope::ENV_STEP_BEGIN,
                   id);
  Py_RETURN_NONE;
}

PyObject* py_metadata(PyObject*, PyObject* args) {
  const char *key, *json;
  Py_ssize_t key_len, json_len;
  if (!PyArg_ParseTuple(args, "s#s#:metadata", &key, &key_len, &json, &json_len)) {
    return nullptr;
  }
  rlscope::metadata(std::string_view(key, size_t(key_len)),
                    std::string_view(json, size_t(json_len)));
  Py_RETURN_NONE;
}

// ------------------------------------------------------------------ pool tasks
// run_task(op, head, tail, index, fn, args, kwargs): a pool task
// (rlscope.integrations.pooltasks.Task) run in a worker: fn(*args, **kwargs) inside
// operation `op` (opened unless open), then the task's record, metadata
// "rlscope.task:<n>" = head + "<index>, <begin>, <end>, <tid>" + tail (begin and end:
// CLOCK_MONOTONIC ns around the call; also when fn raised). One native call per task
// instead of clock reads, a scope and the record's formatting in Python (0.64 against
// 1.7 µs in a tight loop). The record goes through metadata (a mutex and a copy: a
// task's path, not an event's). The Python twin is rlscope.recorder.pyrecorder.run_task.

__thread int64_t tls_os_tid = 0;  // gettid() of this thread, 0 until asked (and after fork)
std::atomic<uint64_t> g_tasks_recorded{0};  // the records' numbers, process-wide

int64_t os_tid() {
  if (tls_os_tid == 0) tls_os_tid = int64_t(syscall(SYS_gettid));
  return tls_os_tid;
}

void forget_os_tid() { tls_os_tid = 0; }  // pthread_atfork child: the thread is new

PyObject* py_run_task(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 7) {
    return PyErr_Format(PyExc_TypeError,
                        "run_task(op, head, tail, index, fn, args, kwargs): 7 arguments, "
                        "not %zd", nargs);
  }
  PyObject *op = args[0], *head = args[1], *tail = args[2], *fn = args[4];
  PyObject *fargs = args[5], *fkw = args[6] == Py_None ? nullptr : args[6];
  if (!PyUnicode_Check(op) || !PyUnicode_Check(head) || !PyUnicode_Check(tail) ||
      !PyTuple_Check(fargs) || (fkw && !PyDict_Check(fkw))) {
    PyErr_SetString(PyExc_TypeError,
                    "run_task(): op, head and tail must be str, args a tuple, kwargs a "
                    "dict or None");
    return nullptr;
  }
  long long index = PyLong_AsLongLong(args[3]);
  if (index == -1 && PyErr_Occurred()) return nullptr;
  if (!rlscope::is_active()) return PyObject_Call(fn, fargs, fkw);
  Py_ssize_t hl, tl;
  const char* h = PyUnicode_AsUTF8AndSize(head, &hl);
  const char* tt = h ? PyUnicode_AsUTF8AndSize(tail, &tl) : nullptr;
  uint32_t id = tt ? intern_str(op) : 0;
  if (id == 0 && PyErr_Occurred()) return nullptr;
  ThreadState* t = thread_state();
  int64_t begin = rlscope::monotonic_ns();
  bool pushed = push_unless_open(t, id);
  PyObject* r = PyObject_Call(fn, fargs, fkw);
  if (pushed) pop_pushed(t, id);
  int64_t end = rlscope::monotonic_ns();
  std::string v(h, size_t(hl));
  v += std::to_string(index);
  v += ", ";
  v += std::to_string(begin);
  v += ", ";
  v += std::to_string(end);
  v += ", ";
  v += std::to_string(os_tid());
  v.append(tt, size_t(tl));
  rlscope::metadata("rlscope.task:" + std::to_string(g_tasks_recorded.fetch_add(1)), v);
  return r;
}

PyObject* py_thread_stack(PyObject*, PyObject*) {
  std::vector<rlscope::StackEntry> open = rlscope::open_scopes(rlscope::tls_thread);
  PyObject* list = PyList_New(Py_ssize_t(open.size()));
  if (!list) return nullptr;
  for (size_t i = 0; i < open.size(); ++i) {
    std::string n = rlscope::string_of(open[i].name);
    PyObject* s = PyUnicode_FromStringAndSize(n.data(), Py_ssize_t(n.size()));
    if (!s) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, Py_ssize_t(i), s);
  }
  return list;
}

PyObject* py_stats(PyObject*, PyObject*) {
  rlscope::Stats s;
  Py_BEGIN_ALLOW_THREADS
  s = rlscope::stats();
  Py_END_ALLOW_THREADS
  return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K}", "events", (unsigned long long)s.events,
                       "dropped", (unsigned long long)s.dropped, "chunks",
                       (unsigned long long)s.chunks, "bytes_written",
                       (unsigned long long)s.bytes_written, "threads",
                       (unsigned long long)s.threads);
}

PyObject* py_after_fork_child(PyObject*, PyObject* args) {
  PyObject* path_bytes = nullptr;
  if (!PyArg_ParseTuple(args, "O&:after_fork_child", PyUnicode_FSConverter, &path_bytes)) {
    return nullptr;
  }
  std::string path = PyBytes_AS_STRING(path_bytes);
  Py_DECREF(path_bytes);
  ThreadState* t = thread_state();
  int rc = rlscope::after_fork_child(path, t);
  if (rc == -1) Py_RETURN_FALSE;  // the parent was not recording: nothing to do
  if (rc != 0) {
    PyErr_Format(error_type(),
                 "cannot create trace file '%s' for forked process %ld: %s; the child is "
                 "not recorded",
                 path.c_str(), long(getpid()), strerror(rc));
    return nullptr;
  }
  Py_RETURN_TRUE;
}

PyMethodDef module_methods[] = {
    {"configure", py_configure, METH_VARARGS,
     "configure(error_type, decorate): exception class for misuse; decorate(scope, func)."},
    {"start", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_start)),
     METH_VARARGS | METH_KEYWORDS,
     "start(path, argv, process_name, rlscope_version, flush_interval_s=0.5, "
     "max_buffer_bytes=256 MiB)"},
    {"stop", py_stop, METH_NOARGS, "Stop recording: write everything and close the file."},
    {"is_active", py_is_active, METH_NOARGS, "True while recording."},
    {"install_pause_handler", py_install_pause_handler, METH_NOARGS,
     "Calibration copies: on SIGTSTP note the time, stop, note the resume time."},
    {"pause_gaps", py_pause_gaps, METH_NOARGS,
     "[(stop_ns, resume_ns), ...] of the pauses since install_pause_handler()."},
    {"set_call_mask", py_set_call_mask, METH_O,
     "set_call_mask(mask) -> previous: bit c set records wrapped calls of category c."},
    {"flush", py_flush, METH_NOARGS, "Write every buffered event now."},
    {"watch_sigterm", py_watch_sigterm, METH_NOARGS,
     "watch_sigterm() -> 0 or an errno: a SIGTERM whose Python handler has not run 0.5 s "
     "later stops the recording and ends the process as SIGTERM would."},
    {"sigterm_answered", py_sigterm_answered, METH_NOARGS,
     "The Python SIGTERM handler ran: the program acts on the signal."},
    {"hook_exit_calls", py_hook_exit_calls, METH_O,
     "hook_exit_calls(library_substring) -> n: the loaded library's calls to _Exit/_exit/"
     "exit stop the recording first (its trace is complete); n entries patched."},
    {"operation", py_operation, METH_O, "operation(name) -> cached Scope"},
    {"phase", py_phase, METH_O, "phase(name) -> cached Scope"},
    {"push_operation", py_push_operation, METH_O, "Open an operation on this thread."},
    {"pop_operation", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_pop_operation)),
     METH_VARARGS | METH_KEYWORDS, "pop_operation(name=None): close the innermost operation."},
    {"progress", py_progress, METH_VARARGS, "progress(timesteps, total) (total -1: unknown)"},
    {"metadata", py_metadata, METH_VARARGS, "metadata(key, json_value)"},
    {"run_task", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_run_task)),
     METH_FASTCALL,
     "run_task(op, head, tail, index, fn, args, kwargs): fn(*args, **kwargs) inside "
     "operation op, then the pool task's record (rlscope.integrations.pooltasks)."},
    {"env_begin", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_env_begin)),
     METH_FASTCALL,
     "env_begin(reset, index, name): a step (or reset) of env `index` of a vector env."},
    {"env_end", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_env_end)),
     METH_FASTCALL, "env_end(reset, name): its end."},
    {"vec_step", py_vec_step, METH_VARARGS,
     "vec_step(method, reset, part, vecs): a vector env class's method recorded as one "
     "vector-level env step (reset) per call on a vector env in vecs (id -> _Vec); part 0 "
     "whole, 1 the send half, 2 the wait half."},
    {"env_call", py_env_call, METH_VARARGS,
     "env_call(method, reset, index, name, operation): method (an env's bound step or "
     "reset) recorded at every call as env `index`'s step (reset) named `name`, inside "
     "`operation` (opened unless open)."},
    {"thread_stack", py_thread_stack, METH_NOARGS,
     "Names of this thread's open scopes, outermost first."},
    {"stats", py_stats, METH_NOARGS,
     "dict(events, dropped, chunks, bytes_written, threads) of the current/last recording."},
    {"after_fork_child", py_after_fork_child, METH_VARARGS,
     "after_fork_child(path): in a forked child, continue recording into a new file."},
    {"wrap", py_wrap, METH_VARARGS,
     "wrap(func, category, name, nonblocking=None): a transparent wrapper recording calls "
     "of func as category 0 (backend), 1 (simulator), 2 (wait) or 3 (mark) under name; "
     "nonblocking=(position, keyword, mask): calls whose argument there says they cannot "
     "block (mask 0: a zero timeout or block=False; else flags with a bit of mask) are "
     "not recorded."},
    {"wrap_operation", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_wrap_operation)),
     METH_VARARGS | METH_KEYWORDS,
     "wrap_operation(func, name, first_use=None, key=None): func run inside operation name "
     "unless one of that name is open on the thread; first_use(self) once per instance "
     "(until it sets key in self.__dict__) while recording."},
    {"quiet_waits", py_quiet_waits, METH_NOARGS,
     "quiet_waits(): this thread's waits are never recorded (a library's plumbing thread)."},
    {"in_operation", py_in_operation, METH_O,
     "in_operation(name): True if an operation of that name is open on this thread."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "rlscope._native",
    "Native recorder of rlscope (per-thread buffers, background trace writer).", -1,
    module_methods,        nullptr, nullptr, nullptr, nullptr,
};

}  // namespace

PyMODINIT_FUNC PyInit__native(void) {
  init_scope_type();
  if (PyType_Ready(&ScopeType) < 0) return nullptr;
  init_callwrapper_type(&CallWrapperType, "rlscope._native.CallWrapper", false);
  init_callwrapper_type(&MethodCallWrapperType, "rlscope._native.MethodCallWrapper", true);
  if (PyType_Ready(&CallWrapperType) < 0 || PyType_Ready(&MethodCallWrapperType) < 0) {
    return nullptr;
  }
  init_opwrapper_type(&OpWrapperType, "rlscope._native.OpWrapper", false);
  init_opwrapper_type(&MethodOpWrapperType, "rlscope._native.MethodOpWrapper", true);
  if (PyType_Ready(&OpWrapperType) < 0 || PyType_Ready(&MethodOpWrapperType) < 0) {
    return nullptr;
  }
  g_opwrapper_own = Py_BuildValue("[ssssss]", "__wrapped__", "_rlscope_op",
                                  "_rlscope_passed", "__reduce_ex__", "__get__", "__call__");
  if (g_opwrapper_own) Py_SETREF(g_opwrapper_own, PyFrozenSet_New(g_opwrapper_own));
  if (!g_opwrapper_own) return nullptr;
  init_vecstep_type();
  if (PyType_Ready(&VecStepType) < 0) return nullptr;
  g_vecstep_own = Py_BuildValue("[ssss]", "__wrapped__", "__reduce_ex__", "__get__",
                                "__call__");
  if (g_vecstep_own) Py_SETREF(g_vecstep_own, PyFrozenSet_New(g_vecstep_own));
  if (!g_vecstep_own) return nullptr;
  g_str_name = PyUnicode_InternFromString("name");
  g_str_sampled = PyUnicode_InternFromString("sampled");
  g_str_last = PyUnicode_InternFromString("last");
  g_str_interval = PyUnicode_InternFromString("interval");
  g_str_start = PyUnicode_InternFromString("start");
  g_str_stop = PyUnicode_InternFromString("stop");
  if (!g_str_name || !g_str_sampled || !g_str_last || !g_str_interval || !g_str_start ||
      !g_str_stop) {
    return nullptr;
  }
  init_envcall_type();
  if (PyType_Ready(&EnvCallType) < 0) return nullptr;
  g_envcall_own = Py_BuildValue("[ssssss]", "__wrapped__", "index", "__reduce_ex__",
                                "__call__", "__class__", "_rlscope_env");
  if (g_envcall_own) Py_SETREF(g_envcall_own, PyFrozenSet_New(g_envcall_own));
  if (!g_envcall_own) return nullptr;
  g_own_attrs = Py_BuildValue("[sssssss]", "__wrapped__", "__reduce_ex__", "__reduce__",
                              "_rlscope_name", "_rlscope_category", "__get__", "__call__");
  if (g_own_attrs) Py_SETREF(g_own_attrs, PyFrozenSet_New(g_own_attrs));
  if (!g_own_attrs) return nullptr;
  pthread_atfork(nullptr, nullptr, forget_os_tid);
  PyObject* m = PyModule_Create(&module_def);
  if (!m) return nullptr;
  g_op_cache = PyDict_New();
  g_phase_cache = PyDict_New();
  g_str_operation = PyUnicode_InternFromString("operation");
  g_str_phase = PyUnicode_InternFromString("phase");
  if (!g_op_cache || !g_phase_cache || !g_str_operation || !g_str_phase ||
      PyModule_AddIntConstant(m, "FORMAT_VERSION", rlscope::kFormatVersion) < 0 ||
      PyModule_AddIntConstant(m, "CALL_BACKEND", rlscope::CALL_BACKEND) < 0 ||
      PyModule_AddIntConstant(m, "CALL_SIMULATOR", rlscope::CALL_SIMULATOR) < 0 ||
      PyModule_AddIntConstant(m, "CALL_WAIT", rlscope::CALL_WAIT) < 0 ||
      PyModule_AddIntConstant(m, "CALL_MARK", rlscope::CALL_MARK) < 0 ||
      PyModule_AddObjectRef(m, "CallWrapper", reinterpret_cast<PyObject*>(&CallWrapperType)) < 0 ||
      PyModule_AddObjectRef(m, "MethodCallWrapper",
                            reinterpret_cast<PyObject*>(&MethodCallWrapperType)) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
