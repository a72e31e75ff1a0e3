// core_module.cpp: the extension module memopt._core -- memopt's C++ core as the
// Python package (python/memopt/) calls it. Marshalling only: chains of Python
// callables become StagedModels, JSON travels as text, and the profiler, solver,
// simulator and executor are the ones the CLI runs.
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/nn/module.h>

#include "gpt2/link_emulation.h"
#include "measure/backend.h"
#include "measure/cpu_allocator.h"
#include "model/staged_model.h"
#include "optimize/optimize.h"
#include "profiler/profiler.h"
#include "runtime/copy_engine.h"
#include "runtime/copy_plan.h"
#include "runtime/executor.h"
#include "solver/search/budget.h"
#include "solver/io/json_printer.h"
#include "solver/io/profile_json.h"
#include "solver/io/schedule_check.h"
#include "solver/io/schedule_json.h"
#include "solver/chain/simulate.h"
#include "solver/search/solve.h"

namespace py = pybind11;

namespace memopt::python {
namespace {

// Note [Python callables and the GIL]
// The profiler and the executor call stages from C++ with the GIL released (the
// autograd engine refuses to run while a thread holds it, and the executor runs
// backward passes), on the thread that called in, or inside loss.backward(), which
// releases the GIL itself. So each call into Python takes the GIL, and the
// py::objects that std::function copies carry are destroyed under it.
std::shared_ptr<py::object> hold(py::object object) {
  return std::shared_ptr<py::object>(new py::object(std::move(object)), [](py::object* p) {
    py::gil_scoped_acquire gil;
    delete p;
  });
}

// Note [A chain holds its model weakly]
// An optimized language model holds its plans (its forward is a Python object), and
// the plans hold the chain. Were the chain's stages to hold their functions and the
// model strongly from C++, where Python's garbage collector sees no reference, that
// cycle would never be collected: a model once optimized would never be freed, nor
// its parameters' device memory, nor its plans' pinned host pools. So the chain holds
// its ChainSpec -- the stage functions and the owner -- by a weak reference, and the
// Python objects that run the chain hold the spec; a stage called after the spec is
// gone (a loss kept past its model) is an error, not a crash.
using WeakSpec = std::shared_ptr<py::object>;  // a py::weakref, released under the GIL

py::object live_spec(const WeakSpec& spec) {
  py::object alive = (*spec)();
  if (alive.is_none())
    throw std::runtime_error("memopt: the model this plan was made for is gone; a step of it cannot run");
  return alive;
}

// Carries the Python module's train/eval flag, so that the profiler's and the
// executor's train() reach its dropouts.
class PythonOwner final : public torch::nn::Module {
 public:
  explicit PythonOwner(WeakSpec spec) : spec_(std::move(spec)) {
    py::gil_scoped_acquire gil;
    torch::nn::Module::train(live_spec(spec_).attr("owner").attr("training").cast<bool>());
  }
  void train(bool on) override {
    torch::nn::Module::train(on);
    py::gil_scoped_acquire gil;
    live_spec(spec_).attr("owner").attr("train")(on);
  }

 private:
  WeakSpec spec_;
};

// A chain of Python stages: forward(x, targets) -> tensor each.
struct Chain {
  std::shared_ptr<model::StagedModel> staged;
  WeakSpec spec;
};

// `spec`: memopt's ChainSpec (python/memopt/_chains.py) -- names, forwards,
// parameters, owner, ends_with_loss -- held weakly (Note [A chain holds its model
// weakly]).
Chain make_chain(const py::object& spec) {
  const auto names = spec.attr("names").cast<std::vector<std::string>>();
  const auto parameters = spec.attr("parameters").cast<std::vector<std::vector<at::Tensor>>>();
  const size_t num_forwards = py::len(spec.attr("forwards"));
  if (names.size() != num_forwards || names.size() != parameters.size())
    throw std::invalid_argument("memopt: one name, forward and parameter list per stage");
  if (names.empty()) throw std::invalid_argument("memopt: a chain needs at least one stage");
  const WeakSpec weak = hold(py::weakref(spec));
  std::vector<model::Stage> stages;
  for (size_t i = 0; i < names.size(); ++i) {
    model::Stage stage;
    stage.name = names[i];
    stage.parameters = parameters[i];
    stage.forward = model::one_tensor([weak, i](const at::Tensor& input, const model::Batch& batch) {
      py::gil_scoped_acquire gil;
      py::object targets = batch.targets.defined() ? py::cast(batch.targets) : py::none();
      return live_spec(weak).attr("forwards")[py::int_(i)](input, targets).cast<at::Tensor>();
    });
    stages.push_back(std::move(stage));
  }
  auto owner_module = std::make_shared<PythonOwner>(weak);
  return Chain{std::make_shared<model::StagedModel>(std::move(stages), owner_module,
                                                    spec.attr("ends_with_loss").cast<bool>()),
               weak};
}

std::string profile_chain(const Chain& chain, const at::Tensor& input, const std::optional<at::Tensor>& targets,
                          const std::string& model_json, int repeat, int warmup, int threads,
                          const py::object& on_progress) {
  profiler::ProfileOptions options;
  options.repeat = repeat;
  options.warmup = warmup;
  options.threads = threads;
  if (!on_progress.is_none()) {
    std::shared_ptr<py::object> progress = hold(on_progress);
    options.on_progress = [progress](int done, int total) {
      py::gil_scoped_acquire gil;
      (*progress)(done, total);
    };
  }
  py::gil_scoped_release no_gil;
  const model::Batch batch{input, targets.value_or(at::Tensor())};
  // Measured where the model is: CUDA events and the caching allocator on a GPU, the
  // counting testbed allocator on the CPU (installed by its first use, here).
  const measure::Backend backend = input.is_cuda() ? measure::Backend::Cuda : measure::Backend::Cpu;
  const profiler::DeviceProfile traced = profiler::profile_on(backend, *chain.staged, batch,
                                                              nlohmann::ordered_json::parse(model_json), options);
  return solver::format_json(profiler::profile_json(traced.measured));
}

// The profile's device (its "device.kind"), where its plans run.
c10::Device profile_device(const solver::Profile& profile) {
  return measure::backend_device(profile.device.value("kind", std::string("cpu")) == "cuda" ? measure::Backend::Cuda
                                                                                           : measure::Backend::Cpu);
}

// The copy engine's link on the profile's device, each direction measured alone
// through the engine a plan will copy with (runtime/link_check.h says how it behaves
// otherwise).
std::string set_measured_link(const std::string& profile_text) {
  solver::Profile profile = solver::parse_profile(profile_text, "the profile");
  py::gil_scoped_release no_gil;
  const runtime::LinkBandwidth bw =
      runtime::measure_copy_bandwidth(0, 0, int64_t{64} << 20, 5, profile_device(profile));
  profile.chain.link = solver::Link{bw.d2h_bytes_per_s, bw.h2d_bytes_per_s};
  return solver::format_json(solver::profile_to_json(profile));
}

std::string set_link(const std::string& profile_text, const std::string& link) {
  solver::Profile profile = solver::parse_profile(profile_text, "the profile");
  gpt2::set_link(profile, link);
  return solver::format_json(solver::profile_to_json(profile));
}

std::string solve(const std::string& profile_text, const std::string& budget, const std::string& solver_word,
                  int slots, int threads) {
  const solver::Profile profile = solver::parse_profile(profile_text, "the profile");
  const auto kind = solver::solver_kind_from_word(solver_word);
  if (!kind) throw std::invalid_argument("solver: unknown solver '" + solver_word + "'");
  solver::SolveOptions options{0, *kind, slots, threads};
  options.budget_bytes = solver::budget_from_text(budget, profile.chain, options);
  py::gil_scoped_release no_gil;
  try {
    solver::Schedule schedule = solver::solve(profile.chain, options);
    schedule.profiled_on = solver::profiled_on(profile);
    return solver::format_json(solver::schedule_to_json(schedule));
  } catch (const solver::InfeasibleBudget& e) {
    if (e.min_budget_bytes <= 0) throw;
    throw solver::InfeasibleBudget(std::string(e.what()) + " Pass budget=\"" + std::to_string(e.min_budget_bytes) +
                                       "\" or budget=\"min\".",
                                   e.min_budget_bytes, e.store_all_peak_bytes);
  }
}

std::string simulate(const std::string& profile_text, const std::string& schedule_text) {
  const solver::Profile profile = solver::parse_profile(profile_text, "the profile");
  const solver::Schedule schedule = solver::parse_schedule(schedule_text, "the schedule");
  solver::SimResult r;
  try {
    r = solver::check_schedule_for_chain(schedule, profile.chain, "the schedule", "the profile");
  } catch (const std::runtime_error& e) {
    throw py::value_error(e.what());  // a schedule that does not fit the profile is bad input
  }
  nlohmann::ordered_json j;
  j["peak_bytes"] = r.peak_bytes;
  j["time_ms"] = r.time_ms;
  j["budget_bytes"] = schedule.budget_bytes;
  j["fits"] = r.peak_bytes <= schedule.budget_bytes;
  j["copy_ms"] = r.copy_ms;
  j["stall_ms"] = r.stall_ms;
  j["store_all_peak_bytes"] = solver::store_all_peak_bytes(profile.chain);
  return j.dump(2);
}

// One schedule ready to run on a chain, step after step: its copy engine (for
// offloading schedules, on the profile's link) lives as long as it does, and as long
// as a step it began still waits for its backward.
class Runner {
 public:
  Runner(Chain chain, const std::string& profile_text, const std::string& schedule_text)
      : plan_(std::make_shared<Plan>(std::move(chain), profile_text, schedule_text)) {}

  at::Tensor run(const at::Tensor& input, const std::optional<at::Tensor>& targets,
                 const std::vector<at::Tensor>& step_inputs) {
    // The copy engine's host pool holds one step's offloaded data; the next step may
    // only start once the last one's backward has used it (or its graph is gone).
    if (plan_->engine && !in_flight_.expired())
      throw py::value_error(
          "memopt: a forward while the previous step's backward is still to come; this plan offloads, and its "
          "host memory holds one step at a time: call backward (or drop that loss) before the next forward");
    // Note [A step holds its plan and its model]: the step's graph outlives this call,
    // and its backward runs the plan's ops on the stages; the graph therefore holds
    // the plan (schedule, copy engine) and the spec strongly until it is gone, so that
    // a loss kept past the object that made it -- `optimize(seq, x)(x).sum()` -- still
    // runs its backward. Once the graph is gone, the model is held weakly again (Note
    // [A chain holds its model weakly]).
    auto token = std::make_shared<StepHold>(StepHold{plan_, hold(live_spec(plan_->chain.spec))});
    in_flight_ = token;
    py::gil_scoped_release no_gil;
    if (plan_->engine) plan_->engine->finish_step();
    return run_scheduled_step(*plan_->chain.staged, plan_->schedule, plan_->options,
                              model::Batch{input, targets.value_or(at::Tensor()), step_inputs}, plan_->anchor,
                              std::move(token));
  }

  // Whether a step this runner began still waits for its backward (its graph alive).
  bool in_flight() const { return !in_flight_.expired(); }

 private:
  struct Plan {
    Plan(Chain chain_in, const std::string& profile_text, const std::string& schedule_text)
        : chain(std::move(chain_in)),
          schedule(solver::parse_schedule(schedule_text, "the schedule")),
          anchor(at::zeros({}).requires_grad_(true)) {
      const solver::Profile profile = solver::parse_profile(profile_text, "the profile");
      runtime::check_schedule_fits_model(schedule, *chain.staged);
      solver::check_schedule_for_chain(schedule, profile.chain, "the schedule", "the profile");
      if (const auto copies = runtime::plan_copies(profile.chain, schedule.ops, "the schedule")) {
        engine = runtime::make_copy_engine(profile_device(profile), copies->engine);
        options.copy_engine = engine.get();
        options.offload_done_before = copies->offload_done_before;
      }
    }
    Chain chain;
    solver::Schedule schedule;
    std::unique_ptr<runtime::CopyEngine> engine;
    runtime::ExecutorOptions options;
    at::Tensor anchor;
  };
  // What a step's graph holds (Note [A step holds its plan and its model]).
  struct StepHold {
    std::shared_ptr<const Plan> plan;
    std::shared_ptr<py::object> spec;
  };

  std::shared_ptr<Plan> plan_;
  std::weak_ptr<void> in_flight_;
};

}  // namespace
}  // namespace memopt::python

PYBIND11_MODULE(_core, m) {
  using namespace memopt;
  using namespace memopt::python;
  m.doc() = "memopt's C++ core: profiler, solver, simulator and executor (see the memopt package)";
  py::register_exception<solver::InfeasibleBudget>(m, "InfeasibleBudget", PyExc_ValueError);
  py::register_exception<solver::ProblemTooLarge>(m, "ProblemTooLarge", PyExc_ValueError);

  py::class_<Chain>(m, "Chain").def_property_readonly("num_stages", [](const Chain& c) {
    return c.staged->num_stages();
  });
  m.def("make_chain", &make_chain, py::arg("spec"));
  m.def("profile", &profile_chain, py::arg("chain"), py::arg("input"), py::arg("targets"), py::arg("model_json"),
        py::arg("repeat"), py::arg("warmup"), py::arg("threads"), py::arg("on_progress"));
  m.def("set_link", &set_link, py::arg("profile"), py::arg("link"));
  m.def("set_measured_link", &set_measured_link, py::arg("profile"));
  m.def("cuda_built", &measure::cuda_backend_built);
  m.def("solve", &solve, py::arg("profile"), py::arg("budget"), py::arg("solver"), py::arg("slots"),
        py::arg("threads"));
  m.def("simulate", &simulate, py::arg("profile"), py::arg("schedule"));
  m.def(
      "write_json",
      [](const std::string& path, const std::string& text) {
        solver::write_json_atomic(path, nlohmann::ordered_json::parse(text));
      },
      py::arg("path"), py::arg("text"));
  py::class_<Runner>(m, "Runner")
      .def(py::init<Chain, const std::string&, const std::string&>(), py::arg("chain"), py::arg("profile"),
           py::arg("schedule"))
      .def("run", &Runner::run, py::arg("input"), py::arg("targets"), py::arg("step_inputs") = std::vector<at::Tensor>{})
      .def("in_flight", &Runner::in_flight);

  // The testbed's device memory: the counting allocator (Note [A caching testbed
  // allocator]) that every CPU measurement reads, installed by its first use.
  m.def("current_bytes", [] { return measure::counting_cpu_allocator().current_bytes(); });
  m.def("peak_bytes", [] { return measure::counting_cpu_allocator().peak_bytes(); });
  m.def("reset_peak", [] { measure::counting_cpu_allocator().reset_peak(); });
  m.def("empty_cache", [] { measure::counting_cpu_allocator().empty_cache(); });
}
