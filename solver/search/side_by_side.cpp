// side_by_side.cpp: Note [Searches side by side].
#include "solver/search/side_by_side.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

namespace memopt::solver {
namespace {

int machine_threads(int threads) {
  if (threads > 0) return threads;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace

void run_side_by_side(const std::vector<std::function<void()>>& tasks, int threads) {
  const int workers = std::min(machine_threads(threads), static_cast<int>(tasks.size()));
  std::atomic<size_t> next{0};
  std::exception_ptr first_error;
  std::mutex error_mutex;
  const auto work = [&] {
    for (size_t i = next++; i < tasks.size(); i = next++) {
      try {
        tasks[i]();
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;  // none where one thread runs them all
  for (int w = 1; w < workers; ++w) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

int threads_per_piece(int threads, int pieces) {
  return std::max(1, machine_threads(threads) / std::max(1, pieces));
}

}  // namespace memopt::solver
