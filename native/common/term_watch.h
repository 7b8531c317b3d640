// A SIGTERM that the program's Python handler never got to act on ends the process anyway.
//
// rls-prof turns SIGTERM into SystemExit in processes that left it at its default, so
// that the trace is flushed. CPython runs that handler on the main thread, between
// bytecodes: a signal that lands just before the main thread blocks in C (a
// multiprocessing lock that Pool.terminate() holds for good), or on another thread while
// the main one is blocked, trips a handler that never runs. The process, which SIGTERM
// would have killed, lives on, and its parent waits for it forever.
//
// The watch wraps the installed handler: it notes when SIGTERM arrived and calls the
// handler it replaced. The Python handler says when it ran. If it has not run
// kTermDeadlineNs after the signal, the recorder's writer thread ends the recording and
// the process, as SIGTERM would have (rlscope::end_after_unanswered_sigterm).
// Async-signal-safe: a clock read and atomic stores.
#pragma once

#include <cstdint>

namespace rlscope {

constexpr int64_t kTermDeadlineNs = 500'000'000;  // what Pool.terminate() then waits

// Wrap the current SIGTERM handler (call after Python installed its own). Returns 0, or
// an errno (EINVAL: SIGTERM is at its default or ignored, nothing to wrap).
int watch_sigterm();

// The Python handler ran: the program is acting on the signal.
void sigterm_answered();

// Whether a SIGTERM arrived more than kTermDeadlineNs before `now_ns` and was not
// answered.
bool sigterm_unanswered(int64_t now_ns);

// Forget a signal noted before fork (the child's own one starts afresh).
void reset_sigterm_watch();

// Let SIGTERM's default action end the process, from a thread that blocks signals.
[[noreturn]] void die_of_sigterm();

}  // namespace rlscope
