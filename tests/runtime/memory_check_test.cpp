// memory_check_test.cpp: the runtime checks real device memory before it trusts a
// plan. On this CPU testbed the device is the counting allocator with a
// capacity (Note [Device memory limit]): a plan that does not fit is refused with the
// shortfall and the budget to solve for, a step that runs out midway leaves model,
// optimizer and RNG untouched, and training then continues along a smaller plan
// exactly as if the failed attempt had never happened.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <string>

#include "runtime/memory_check.h"
#include "solver/dp/baselines.h"
#include "solver/chain/simulate.h"
#include "solver/search/solve.h"
#include "solver/chain/units.h"
#include "tests/runtime/runtime_fixture.h"

namespace memopt::runtime {
namespace {

using testing::identical;
using testing::TinyTrainer;

// Lifts the device limit however the test ends: other tests share the process.
struct DeviceLimit {
  explicit DeviceLimit(int64_t bytes) { measure::counting_cpu_allocator().set_limit_bytes(bytes); }
  ~DeviceLimit() { measure::counting_cpu_allocator().set_limit_bytes(0); }
};

TEST(MemoryCheck, APlanTooLargeIsRefusedAndTrainingContinuesAlongASmallerOne) {
  at::set_num_threads(1);
  TinyTrainer reference, trainer;
  const solver::Chain chain = trainer.profile().chain;
  const std::vector<solver::Op> store_all = solver::store_all_ops(chain);
  const int64_t store_all_peak = solver::simulate_sequential(chain, store_all).peak_bytes;
  const solver::Schedule small = solver::solve(chain, {store_all_peak * 5 / 10, solver::SolverKind::RecomputeOnly});

  // The reference trains two steps along the small plan and never meets a limit.
  const CpuRngState rng = cpu_rng_state();
  const double ref_loss1 = reference.step(small.ops);
  const double ref_loss2 = reference.step(small.ops);
  const auto ref_params = reference.parameters();

  set_cpu_rng_state(rng);
  EXPECT_EQ(trainer.step(small.ops), ref_loss1);
  ASSERT_EQ(unallocated_state_bytes(*trainer.model, 0), 0);  // gradients and moments exist now
  const auto params = trainer.parameters();
  const auto state = trainer.optimizer_state();
  const CpuRngState rng_before = cpu_rng_state();

  // A device with room for 70% of the store-all peak besides what is allocated now.
  const int64_t room = store_all_peak * 7 / 10;
  DeviceLimit limit(measure::counting_cpu_allocator().current_bytes() + room);

  measure::CpuMemoryMeter meter;
  // 1. The check refuses store-all before anything runs, by how much and with the budget.
  try {
    check_device_memory(meter, store_all_peak, 0, "s.json");
    FAIL() << "a plan 30% too large for the device was accepted";
  } catch (const InsufficientDeviceMemory& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.needed_bytes, store_all_peak);
    EXPECT_EQ(e.available_bytes, room);
    EXPECT_EQ(e.suggested_budget_bytes, room);
    EXPECT_NE(what.find("s.json"), std::string::npos) << what;
    EXPECT_NE(what.find("short by " + solver::format_bytes(store_all_peak - room)), std::string::npos) << what;
    EXPECT_NE(what.find("--budget " + std::to_string(room)), std::string::npos) << what;
    // The budget it suggests is one the solver can meet.
    EXPECT_NO_THROW(solver::solve(chain, {e.suggested_budget_bytes, solver::SolverKind::RecomputeOnly}));
  }
  // The small plan passes the same check, and its probe is not kept in the cache.
  const int64_t reserved_before = meter.reserved_bytes();
  EXPECT_NO_THROW(check_device_memory(meter, small.predicted.peak_bytes, 0, "small.json"));
  EXPECT_LE(meter.reserved_bytes(), reserved_before);

  // 2. Without the check, store-all runs out of memory midway; nothing is corrupted.
  zero_grads_in_place(*trainer.model);
  EXPECT_THROW(run_step_or_restore(*trainer.model, store_all, trainer.batch, meter, {}, "s.json"),
               InsufficientDeviceMemory);
  const int64_t device_bytes = measure::counting_cpu_allocator().limit_bytes();
  measure::counting_cpu_allocator().set_limit_bytes(0);  // the snapshots below are the test's, not the device's
  EXPECT_TRUE(identical(trainer.parameters(), params));
  EXPECT_TRUE(identical(trainer.optimizer_state(), state));
  // No dropout mask drawn by the failed step is lost to the next one.
  EXPECT_EQ(cpu_rng_state().engine.data().state_, rng_before.engine.data().state_);
  EXPECT_EQ(cpu_rng_state().engine.data().next_, rng_before.engine.data().next_);

  // 3. Training continues along the small plan, on the limited device, exactly like
  // the reference that never failed.
  measure::counting_cpu_allocator().set_limit_bytes(device_bytes);
  EXPECT_EQ(trainer.step(small.ops), ref_loss2);
  measure::counting_cpu_allocator().set_limit_bytes(0);
  EXPECT_TRUE(identical(trainer.parameters(), ref_params));
}

}  // namespace
}  // namespace memopt::runtime
