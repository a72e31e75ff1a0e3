// thread_ranges_test.cpp: Note [Ranges on every thread] -- ATen ops on a thread that
// never opened a range still run under the open one, as a GPU backward does on
// autograd's device thread.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "measure/thread_ranges.h"

namespace memopt::measure {
namespace {

// What each thread's stack saw: the ids pushed, and the depth left at the end.
struct Stacks {
  std::mutex mutex;
  std::map<std::thread::id, std::vector<uint64_t>> pushed;
  std::map<std::thread::id, int> depth;
};

TEST(ThreadRanges, OpsOnAnyThreadRunUnderTheOpenRangeAndOnlyThen) {
  Stacks stacks;
  ThreadRanges ranges(
      [&](uint64_t id) {
        std::lock_guard<std::mutex> lock(stacks.mutex);
        stacks.pushed[std::this_thread::get_id()].push_back(id);
        ++stacks.depth[std::this_thread::get_id()];
      },
      [&] {
        std::lock_guard<std::mutex> lock(stacks.mutex);
        --stacks.depth[std::this_thread::get_id()];
      });
  const at::Tensor x = at::randn({8, 8});
  const auto on_another_thread = [&] {
    std::thread::id worker_id;
    std::thread worker([&] {
      worker_id = std::this_thread::get_id();
      at::matmul(x, x);
    });
    worker.join();
    return worker_id;
  };

  on_another_thread();  // no range open: nothing pushed
  EXPECT_TRUE(stacks.pushed.empty());

  ranges.set_open(7);
  const std::thread::id worker_id = on_another_thread();
  ranges.set_open(0);
  const size_t num_pushes = stacks.pushed.at(worker_id).size();
  on_another_thread();  // closed again: nothing more pushed, on any thread
  size_t total = 0;
  for (const auto& [thread, ids] : stacks.pushed) total += ids.size();
  EXPECT_EQ(total, num_pushes);

  ASSERT_EQ(stacks.pushed.count(worker_id), 1u);
  const std::vector<uint64_t>& ids = stacks.pushed.at(worker_id);
  ASSERT_FALSE(ids.empty());
  for (const uint64_t id : ids) EXPECT_EQ(id, 7u);
  for (const auto& [thread, depth] : stacks.depth) EXPECT_EQ(depth, 0);  // every push popped
}

TEST(ThreadRanges, OneAtATime) {
  ThreadRanges first([](uint64_t) {}, [] {});
  EXPECT_THROW(ThreadRanges([](uint64_t) {}, [] {}), std::logic_error);
}

}  // namespace
}  // namespace memopt::measure
