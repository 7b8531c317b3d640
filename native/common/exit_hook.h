// Run a callback before a shared library ends the process with _Exit, _exit or exit.
//
// Some runtimes end their worker processes from C++ without unwinding Python, so
// neither atexit nor a signal handler runs (Ray's core worker calls _Exit(1) on its
// shutdown path). Their calls to these functions go through the library's own GOT
// entries: pointing those at a hook flushes the trace first, then calls the real
// function. Nothing else in the process changes. Plain C++, no Python.
#pragma once

namespace rlscope {

using ExitCallback = void (*)();

// Patch the _Exit/_exit/exit entries of every loaded object whose path contains
// `library_substring` (non-empty). `callback` runs once, on the first such call, before
// the real function. Returns the number of entries patched (0: the library is not
// loaded, or calls these functions some other way), or -1 on a bad argument.
int hook_exit_calls(const char* library_substring, ExitCallback callback);

}  // namespace rlscope
