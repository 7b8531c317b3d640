// Per-thread event buffer: a singly linked list of fixed-size blocks, one
// producer (the owning thread) and one consumer (whoever holds the recorder's
// drain mutex: the writer thread or a synchronous flush).
//
// Producer protocol: write records into the tail block, then publish the new
// committed count with a release store. When a block is full it links a new
// block (store to `next` with release) after its last publish, so a consumer
// that sees `next != nullptr` (acquire) also sees the final committed count.
// Consumer protocol: load `next` (acquire), then `committed` (acquire), read
// records up to committed; when next was non-null the block is final and is
// returned to the pool.
//
// The hot path (append) takes no lock, allocates nothing and encodes nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

namespace rlscope {

// One event: 16 bytes, fixed size.
struct Record {
  int64_t ts;     // CLOCK_MONOTONIC ns (for kArgKind records: the argument value)
  uint32_t name;  // interned string id, 0 = none
  uint32_t kind;  // EventKind, or kArgKind
};
static_assert(sizeof(Record) == 16, "Record must be 16 bytes");

// Internal kind: an argument of the preceding event (value in `ts`).
constexpr uint32_t kArgKind = 255;

struct Block {
  static constexpr uint32_t kCapacity = 4096;  // 4096 records = 64 KiB
  std::atomic<uint32_t> committed{0};
  std::atomic<Block*> next{nullptr};
  alignas(64) Record records[kCapacity];
};

constexpr size_t kBlockBytes = sizeof(Block);

// Free list of blocks plus the memory bound. Taking a block locks a mutex:
// that happens once per 4096 events (or when dropping, see append), so the
// cost is amortised and the per-event path stays lock-free.
class BlockPool {
 public:
  // At least 2 blocks are always allowed so a single thread can make progress
  // (fill one block while the writer drains the other).
  void set_limit_bytes(uint64_t bytes);
  Block* acquire();             // nullptr when the memory bound is reached
  void release(Block* b);
  void trim();                  // free all pooled (unused) blocks
  size_t total_blocks();
  std::mutex& mutex() { return mu_; }
  void reinit_after_fork();     // child: fresh mutex (no other thread exists)
  // Child: blocks owned by threads that do not exist there are leaked (not
  // freed: cheaper, and a fork+exec child touches no copied heap pages);
  // stop counting them against the bound.
  void forget(size_t n);

 private:
  std::mutex mu_;
  std::vector<Block*> free_;
  size_t total_ = 0;            // blocks allocated (in use + free)
  size_t max_ = 4096;
};

class ThreadBuffer {
 public:
  explicit ThreadBuffer(BlockPool* pool) : pool_(pool) {}
  ~ThreadBuffer();
  ThreadBuffer(const ThreadBuffer&) = delete;
  ThreadBuffer& operator=(const ThreadBuffer&) = delete;

  // ---- producer side (owning thread only) ----
  inline void append(int64_t ts, uint32_t name, uint32_t kind) {
    if (__builtin_expect(used_ == Block::kCapacity, 0)) {
      if (!next_block()) {
        dropped_.store(dropped_.load(std::memory_order_relaxed) + 1,
                       std::memory_order_relaxed);
        return;
      }
    }
    Record& r = tail_->records[used_];
    r.ts = ts;
    r.name = name;
    r.kind = kind;
    ++used_;
    tail_->committed.store(used_, std::memory_order_release);
  }

  // Appends n contiguous records with ONE publish, so a consumer never sees a
  // part of them. n <= Block::kCapacity. All n are dropped together if no
  // memory is left (counted as one dropped event).
  inline void append_n(const Record* recs, uint32_t n) {
    if (__builtin_expect(Block::kCapacity - used_ < n, 0)) {
      if (!next_block()) {
        dropped_.store(dropped_.load(std::memory_order_relaxed) + 1,
                       std::memory_order_relaxed);
        return;
      }
    }
    std::memcpy(&tail_->records[used_], recs, n * sizeof(Record));
    used_ += n;
    tail_->committed.store(used_, std::memory_order_release);
  }

  // ---- consumer side (drain mutex held) ----
  // Appends all published records to `out` and frees consumed full blocks.
  size_t drain_into(std::vector<Record>& out);
  // Records published but not yet drained (approximate, for the writer's
  // "enough pending?" check).
  size_t pending() const;
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  // Drop everything published so far without reading it.
  void discard();

  // Blocks currently linked in this buffer (consumer side or fork child).
  size_t count_blocks() const;

  // ---- fork child only (single thread left) ----
  // Forget unflushed records (the parent writes them) and reset counters.
  void reset_in_child();

 private:
  bool next_block();  // slow path: link a new tail block

  BlockPool* pool_;
  // producer-owned, written on every event
  Block* tail_ = nullptr;
  uint32_t used_ = Block::kCapacity;  // "full" until the first block exists
  std::atomic<uint64_t> dropped_{0};
  // published by the producer when the first block is linked
  std::atomic<Block*> first_{nullptr};
  // consumer-owned (separate cache line)
  alignas(64) Block* head_ = nullptr;
  uint32_t read_ = 0;
};

}  // namespace rlscope
