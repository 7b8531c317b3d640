#include "aggregator.h"

#include "pb_encode.h"
#include "recorder.h"
#include "trace_fields.h"
#include "trace_writer.h"

namespace rlscope {

namespace C = fields::chunk;

namespace {

bool opens(uint32_t kind) {
  return kind == OPERATION_BEGIN || kind == PHASE_BEGIN || kind == BACKEND_CALL_BEGIN ||
         kind == SIMULATOR_CALL_BEGIN || kind == WAIT_CALL_BEGIN;
}
bool closes(uint32_t kind) {
  return kind == OPERATION_END || kind == PHASE_END || kind == BACKEND_CALL_END ||
         kind == SIMULATOR_CALL_END || kind == WAIT_CALL_END;
}
// Kept as events inside a gap: rare, and what phases, trends and spans are read from.
bool kept(uint32_t kind) {
  return kind == PROGRESS || kind == PROCESS_START || kind == PROCESS_END ||
         kind == PHASE_BEGIN || kind == PHASE_END;
}

constexpr int64_t kProgressGapNs = 100'000'000;

}  // namespace

void Aggregator::reset() {
  threads_.clear();
  children_.clear();
  states_.clear();
  states_emitted_ = 0;
  open_gaps_ = 0;
  for (std::string* s : {&r_thread_, &r_gap_, &r_state_, &r_ns_, &r_calls_, &r_events_,
                         &r_until_, &c_thread_, &c_gap_, &c_kind_, &c_n_}) {
    s->clear();
  }
}

uint32_t Aggregator::push_state(uint32_t parent, uint32_t kind, uint32_t name) {
  uint64_t key = (uint64_t(parent) << 32) ^ (uint64_t(kind) << 27) ^ uint64_t(name);
  // The key is exact while name < 2^27 and kind < 32; beyond, compare the definition.
  auto it = children_.find(key);
  if (it != children_.end()) {
    const StateDef& d = states_[it->second - 1];
    if (d.parent == parent && d.kind == kind && d.name == name) return it->second;
  }
  states_.push_back(StateDef{parent, kind, name});
  uint32_t id = uint32_t(states_.size());
  children_[key] = id;
  return id;
}

void Aggregator::apply(ThreadAgg& t, uint32_t kind, uint32_t name) {
  if (opens(kind)) {
    uint32_t s = push_state(t.state, kind, name);
    t.stack.push_back(Entry{kind, name});
    t.prefix.push_back(s);
    t.state = s;
  } else if (closes(kind)) {
    // The latest open entry of this kind (entries of other kinds may be inside it).
    size_t i = t.stack.size();
    while (i > 0 && t.stack[i - 1].kind != kind - 1) --i;
    if (i == 0) return;  // an END with no BEGIN: ignored, as the analysis does
    t.stack.erase(t.stack.begin() + long(i - 1));
    t.prefix.resize(i - 1);
    uint32_t s = i >= 2 ? t.prefix[i - 2] : 0;
    for (size_t j = i - 1; j < t.stack.size(); ++j) {
      s = push_state(s, t.stack[j].kind, t.stack[j].name);
      t.prefix.push_back(s);
    }
    t.state = s;
  }
}

void Aggregator::detail(uint32_t thread, int64_t ts, uint32_t kind, uint32_t name) {
  ThreadAgg& t = threads_[thread];
  apply(t, kind, name);
  t.last_ts = ts;
}

bool Aggregator::aggregate(ChunkEncoder& enc, uint32_t thread, int64_t ts, uint32_t kind,
                           uint32_t name) {
  ThreadAgg& t = threads_[thread];
  if (!t.in_gap) {
    // Close what is open (innermost first) so readers pair scopes as ever; phases stay
    // open (their events are kept).
    for (size_t i = t.stack.size(); i-- > 0;) {
      if (t.stack[i].kind == PHASE_BEGIN) continue;
      enc.add_event(ts, thread, t.stack[i].kind + 1, t.stack[i].name);
      t.counts[(t.stack[i].kind + 1) & 31] -= 1;
    }
    enc.add_event(ts, thread, AGGREGATED_BEGIN, 0);
    t.in_gap = true;
    t.dirty = true;
    t.last_ts = ts;
    ++open_gaps_;
  }
  if (ts > t.last_ts) {
    t.rows[t.state].ns += ts - t.last_ts;
    t.last_ts = ts;
  }
  if (kind == PROGRESS) {
    // Progress reports carry cumulative counts: thinned to one per kProgressGapNs in
    // a gap, rates and trends lose nothing and a report per step cannot fill the disk.
    if (t.has_progress && ts - t.last_progress_ts < kProgressGapNs) return false;
    t.has_progress = true;
    t.last_progress_ts = ts;
    return true;
  }
  apply(t, kind, name);
  if (kept(kind)) return true;
  Row& r = t.rows[t.state];
  ++r.events;
  if (opens(kind)) ++r.calls;
  t.counts[kind & 31] += 1;
  return false;
}

void Aggregator::close_gaps(ChunkEncoder& enc) {
  for (auto& [index, t] : threads_) close(enc, index, t);
}

void Aggregator::close_gap(ChunkEncoder& enc, uint32_t thread) {
  auto it = threads_.find(thread);
  if (it != threads_.end()) close(enc, thread, it->second);
}

void Aggregator::close(ChunkEncoder& enc, uint32_t index, ThreadAgg& t) {
  if (!t.in_gap) return;
  enc.add_event(t.last_ts, index, AGGREGATED_END, 0);
  for (size_t i = 0; i < t.stack.size(); ++i) {
    if (t.stack[i].kind == PHASE_BEGIN) continue;
    enc.add_event(t.last_ts, index, t.stack[i].kind, t.stack[i].name);
    t.rows[t.prefix[i]].calls -= 1;  // the analysis counts this BEGIN as a call
    t.counts[t.stack[i].kind & 31] -= 1;
  }
  flush_rows(index, t);
  t.in_gap = false;
  ++t.gap;
  --open_gaps_;
}

void Aggregator::flush_rows(uint32_t index, ThreadAgg& t) {
  if (!t.dirty) return;
  for (auto& [state, r] : t.rows) {
    pb::put_varint(r_thread_, index);
    pb::put_varint(r_gap_, t.gap);
    pb::put_varint(r_state_, state);
    pb::put_varint(r_ns_, uint64_t(r.ns));
    pb::put_varint(r_calls_, pb::zigzag(r.calls));
    pb::put_varint(r_events_, r.events);
    pb::put_varint(r_until_, uint64_t(t.last_ts));
  }
  t.rows.clear();
  for (uint32_t k = 0; k < 32; ++k) {
    if (!t.counts[k]) continue;
    pb::put_varint(c_thread_, index);
    pb::put_varint(c_gap_, t.gap);
    pb::put_varint(c_kind_, k);
    pb::put_varint(c_n_, pb::zigzag(t.counts[k]));
    t.counts[k] = 0;
  }
  t.dirty = t.in_gap;
}

bool Aggregator::has_rows() const {
  if (!r_thread_.empty() || !c_thread_.empty()) return true;
  for (const auto& [index, t] : threads_) {
    if (t.dirty) return true;
  }
  return false;
}

void Aggregator::emit(ChunkEncoder& enc) {
  for (auto& [index, t] : threads_) flush_rows(index, t);
  std::string out;
  for (size_t id = states_emitted_ + 1; id <= states_.size(); ++id) {
    const StateDef& d = states_[id - 1];
    std::string m;
    pb::put_uint(m, fields::agg_state::kId, id);
    pb::put_uint(m, fields::agg_state::kParent, d.parent);
    pb::put_uint(m, fields::agg_state::kKind, d.kind);
    pb::put_uint(m, fields::agg_state::kName, d.name);
    pb::put_bytes(out, C::kAggStates, m);
  }
  states_emitted_ = states_.size();
  pb::put_packed(out, C::kAggThread, r_thread_);
  pb::put_packed(out, C::kAggGap, r_gap_);
  pb::put_packed(out, C::kAggState, r_state_);
  pb::put_packed(out, C::kAggNs, r_ns_);
  pb::put_packed(out, C::kAggCalls, r_calls_);
  pb::put_packed(out, C::kAggEvents, r_events_);
  pb::put_packed(out, C::kAggUntilNs, r_until_);
  pb::put_packed(out, C::kCountThread, c_thread_);
  pb::put_packed(out, C::kCountGap, c_gap_);
  pb::put_packed(out, C::kCountKind, c_kind_);
  pb::put_packed(out, C::kCountN, c_n_);
  for (std::string* s : {&r_thread_, &r_gap_, &r_state_, &r_ns_, &r_calls_, &r_events_,
                         &r_until_, &c_thread_, &c_gap_, &c_kind_, &c_n_}) {
    s->clear();
  }
  enc.add_raw(out);
}

}  // namespace rlscope
