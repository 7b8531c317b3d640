#include "thread_buffer.h"

#include <new>

namespace rlscope {

void BlockPool::set_limit_bytes(uint64_t bytes) {
  std::lock_guard<std::mutex> lk(mu_);
  uint64_t n = bytes / kBlockBytes;
  max_ = n < 2 ? 2 : size_t(n);
}

Block* BlockPool::acquire() {
  Block* b = nullptr;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!free_.empty()) {
      b = free_.back();
      free_.pop_back();
    } else if (total_ < max_) {
      ++total_;
    } else {
      return nullptr;
    }
  }
  if (!b) {
    b = new (std::nothrow) Block();
    if (!b) {
      std::lock_guard<std::mutex> lk(mu_);
      --total_;
      return nullptr;
    }
  }
  b->committed.store(0, std::memory_order_relaxed);
  b->next.store(nullptr, std::memory_order_relaxed);
  return b;
}

void BlockPool::release(Block* b) {
  std::lock_guard<std::mutex> lk(mu_);
  if (total_ > max_) {  // the limit was lowered: give memory back
    --total_;
    delete b;
    return;
  }
  free_.push_back(b);
}

void BlockPool::trim() {
  std::vector<Block*> blocks;
  {
    std::lock_guard<std::mutex> lk(mu_);
    blocks.swap(free_);
    total_ -= blocks.size();
  }
  for (Block* b : blocks) delete b;
}

size_t BlockPool::total_blocks() {
  std::lock_guard<std::mutex> lk(mu_);
  return total_;
}

void BlockPool::reinit_after_fork() { new (&mu_) std::mutex(); }

void BlockPool::forget(size_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  total_ = n > total_ ? 0 : total_ - n;
}

size_t ThreadBuffer::count_blocks() const {
  size_t n = 0;
  for (Block* b = head_ ? head_ : first_.load(std::memory_order_acquire); b;
       b = b->next.load(std::memory_order_acquire)) {
    ++n;
  }
  return n;
}

ThreadBuffer::~ThreadBuffer() {
  Block* b = head_ ? head_ : first_.load(std::memory_order_acquire);
  while (b) {
    Block* nx = b->next.load(std::memory_order_acquire);
    pool_->release(b);
    b = nx;
  }
}

bool ThreadBuffer::next_block() {
  Block* b = pool_->acquire();
  if (!b) return false;
  // Publish after the (already published) last record of the old tail.
  if (tail_) {
    tail_->next.store(b, std::memory_order_release);
  } else {
    first_.store(b, std::memory_order_release);
  }
  tail_ = b;
  used_ = 0;
  return true;
}

size_t ThreadBuffer::drain_into(std::vector<Record>& out) {
  size_t n = 0;
  for (;;) {
    if (!head_) {
      head_ = first_.load(std::memory_order_acquire);
      read_ = 0;
      if (!head_) break;
    }
    Block* nx = head_->next.load(std::memory_order_acquire);
    uint32_t c = head_->committed.load(std::memory_order_acquire);
    if (c > read_) {
      out.insert(out.end(), head_->records + read_, head_->records + c);
      n += c - read_;
      read_ = c;
    }
    if (!nx) break;
    // `next` was set after the block's last publish: the block is done.
    pool_->release(head_);
    head_ = nx;
    read_ = 0;
  }
  return n;
}

size_t ThreadBuffer::pending() const {
  size_t n = 0;
  Block* b = head_ ? head_ : first_.load(std::memory_order_acquire);
  uint32_t r = head_ ? read_ : 0;
  while (b) {
    Block* nx = b->next.load(std::memory_order_acquire);
    n += b->committed.load(std::memory_order_acquire) - r;
    r = 0;
    b = nx;
  }
  return n;
}

void ThreadBuffer::discard() {
  for (;;) {
    if (!head_) {
      head_ = first_.load(std::memory_order_acquire);
      read_ = 0;
      if (!head_) return;
    }
    Block* nx = head_->next.load(std::memory_order_acquire);
    read_ = head_->committed.load(std::memory_order_acquire);
    if (!nx) return;
    pool_->release(head_);
    head_ = nx;
    read_ = 0;
  }
}

void ThreadBuffer::reset_in_child() {
  // We are the producer and no consumer exists: everything before the tail
  // goes back to the pool, the tail is marked fully read.
  discard();
  dropped_.store(0, std::memory_order_relaxed);
}

}  // namespace rlscope
