// ocslab._shim: the Python face of the per-rank phase shim (ocslab/phase/shim.h) for the
// PyTorch backend (experiments/torch/ocslab/torch_backend.py). It binds the same C++ Shim and
// the same controller flags (--controller, --job, --controller-token-file, ...) the collective
// workloads parse, so the controller protocol and the token checks exist once, in C++. It also
// binds the phase profiler and the collbench row writers, so a torch rank's steps, its
// ops-rank<R>.csv and its learned phase table come from the same code as collbench's.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <boost/program_options.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/common/csv_writer.h"
#include "ocslab/common/error.h"
#include "ocslab/common/sample.h"
#include "ocslab/phase/phase_profiler.h"
#include "ocslab/phase/shim.h"
#include "ocslab/workloads/op_record.h"
#include "ocslab/workloads/shim_hooks.h"

namespace py = pybind11;
namespace po = boost::program_options;
using namespace ocslab;

namespace {

// The collbench option set parsed from `args` (the same flags, the same errors naming them):
// None without --controller. profile_steps: how often the step must repeat before the shim
// uses it, in both modes (the backend's ops are unmarked: the shim finds the step by period).
std::optional<phase::ShimOptions> shim_options(const std::vector<std::string>& args, int rank, int world,
                                               const std::string& host, int ack_wait_ms, int profile_steps) {
  if (ack_wait_ms < 1) throw Error("ack wait " + std::to_string(ack_wait_ms) + " ms: want at least 1");
  if (profile_steps < 1) throw Error("profile steps " + std::to_string(profile_steps) + ": want at least 1");
  po::options_description desc;
  workloads::add_phase_options(desc);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(desc).run(), vm);
  } catch (const po::error& e) {
    throw Error(e.what());
  }
  po::notify(vm);
  auto o = workloads::phase_options(vm, rank, world, host, std::chrono::milliseconds(ack_wait_ms));
  if (o) o->profile_steps = profile_steps;
  return o;
}

py::dict samples_of(const phase::Shim& s) {
  py::list rows;
  for (const auto& x : s.samples()) {
    rows.append(py::make_tuple(x.t_ns, x.host, x.source, x.subject, x.signal, x.value, x.unit));
  }
  py::dict d;
  d["columns"] = py::make_tuple("t_ns", "host", "source", "subject", "signal", "value", "unit");
  d["rows"] = rows;
  return d;
}

workloads::OpType op_type_of(const std::string& name) {
  using workloads::OpType;
  for (OpType t :
       {OpType::kAllReduce, OpType::kAllGather, OpType::kReduceScatter, OpType::kSendRecv, OpType::kBarrier}) {
    if (name == workloads::op_name(t)) return t;
  }
  throw Error("op '" + name +
              "': not one of collbench's op types (allreduce, allgather, reducescatter, sendrecv, "
              "barrier)");
}

// ops-rank<R>.csv and timeline-rank<R>.csv in `folder`, as collbench's OutputWriter writes them.
void write_rank_rows(const std::string& folder, int rank, const std::vector<workloads::OpRecord>& rows) {
  CsvWriter ops(folder + "/ops-rank" + std::to_string(rank) + ".csv");
  CsvWriter timeline(folder + "/timeline-rank" + std::to_string(rank) + ".csv");
  ops.header(workloads::op_csv_columns());
  timeline.header(sample_csv_columns());
  for (const auto& r : rows) {
    ops.row(workloads::op_csv_fields(r));
    for (const auto& smp : workloads::op_samples(r)) timeline.row(sample_csv_fields(smp));
  }
  ops.close();
  timeline.close();
}

void bind_rows_and_profiler(py::module_& m) {
  using workloads::OpRecord;
  py::class_<OpRecord>(m, "OpRecord", "One row of ops-rank<R>.csv (ocslab/workloads/op_record.h)")
      .def(py::init<>())
      .def_readwrite("rank", &OpRecord::rank)
      .def_readwrite("host", &OpRecord::host)
      .def_readwrite("step", &OpRecord::step)
      .def_readwrite("warmup", &OpRecord::warmup)
      .def_readwrite("index", &OpRecord::index)
      .def_readwrite("seq", &OpRecord::seq)
      .def_readwrite("group", &OpRecord::group)
      .def_readwrite("kind", &OpRecord::kind)
      .def_property(
          "op", [](const OpRecord& r) { return std::string(workloads::op_name(r.type)); },
          [](OpRecord& r, const std::string& name) { r.type = op_type_of(name); })
      .def_readwrite("group_size", &OpRecord::group_size)
      .def_readwrite("bytes", &OpRecord::bytes)
      .def_readwrite("start_ns", &OpRecord::start_ns)
      .def_readwrite("end_ns", &OpRecord::end_ns)
      .def_readwrite("duration_ns", &OpRecord::duration_ns)
      .def_readwrite("wait_ns", &OpRecord::wait_ns)
      .def_readwrite("wait_start_ns", &OpRecord::wait_start_ns)
      .def_readwrite("phase", &OpRecord::phase)
      .def_readwrite("reconfigured", &OpRecord::reconfigured)
      .def_readwrite("provisioned", &OpRecord::provisioned)
      .def_readwrite("fallback", &OpRecord::fallback)
      .def_readwrite("topo", &OpRecord::topo)
      .def_readwrite("compute_ns", &OpRecord::compute_ns)
      .def_readwrite("step_compute_ns", &OpRecord::step_compute_ns)
      .def_readwrite("barrier", &OpRecord::barrier);
  m.def("write_rank_rows", &write_rank_rows, py::arg("folder"), py::arg("rank"), py::arg("rows"),
        "FOLDER/ops-rank<R>.csv and FOLDER/timeline-rank<R>.csv, in collbench's format.");

  py::class_<phase::LearnedPhases>(m, "LearnedPhases")
      .def_readonly("warmup_ops", &phase::LearnedPhases::warmup_ops)
      .def_readonly("steps", &phase::LearnedPhases::steps)
      .def_property_readonly("ops", [](const phase::LearnedPhases& l) { return l.table.ops.size(); })
      .def("write_csv", &phase::write_phases_csv, py::arg("path"),
           "phases.csv: index,group,type,bytes,idle_us (the safe-window table)");
  py::class_<phase::PhaseProfiler>(m, "PhaseProfiler", "Learns the repeating step of an op stream (phase_profiler.h)")
      .def(py::init([](int steps) { return phase::PhaseProfiler(phase::ProfileOptions{.steps = steps}); }),
           py::arg("steps") = 5)
      .def(
          "add",
          [](phase::PhaseProfiler& p, const std::string& group, const std::vector<int>& ranks, const std::string& type,
             uint64_t bytes, int64_t start_ns, int64_t end_ns) {
            p.add({group, ranks, phase::kind_of_type(type), type, bytes, start_ns, end_ns, false});
          },
          py::arg("group"), py::arg("ranks"), py::arg("type"), py::arg("bytes"), py::arg("start_ns"), py::arg("end_ns"),
          "One op as the rank ran it, unmarked: the profiler finds the step by period.")
      .def("finish", &phase::PhaseProfiler::finish)
      .def(
          "result",
          [](const phase::PhaseProfiler& p) -> py::tuple {
            auto r = p.result();
            if (!r.learned) return py::make_tuple(py::none(), r.reason);
            return py::make_tuple(std::move(*r.learned), std::string());
          },
          "(LearnedPhases, '') or (None, why the stream gave no step)");
}

}  // namespace

PYBIND11_MODULE(_shim, m) {
  m.doc() = "The ocslab phase shim (C++ ocslab::phase::Shim) for the PyTorch backend";
  auto shim_error = py::register_exception<Error>(m, "ShimError", PyExc_RuntimeError);
  // PhaseError is an Error: registered after it so a refusal keeps its own Python type.
  py::register_exception<phase::PhaseError>(m, "PhaseError", shim_error.ptr());

  py::class_<phase::ShimOptions>(m, "ShimOptions")
      .def_readonly("host", &phase::ShimOptions::host)
      .def_readonly("port", &phase::ShimOptions::port)
      .def_readonly("job", &phase::ShimOptions::job)
      .def_readonly("rank", &phase::ShimOptions::rank)
      .def_readonly("world", &phase::ShimOptions::world)
      .def_property_readonly("has_token", [](const phase::ShimOptions& o) { return !o.token.empty(); });

  m.def("shim_options", &shim_options, py::arg("args"), py::arg("rank"), py::arg("world"), py::arg("host"),
        py::arg("ack_wait_ms") = 60000, py::arg("profile_steps") = 5,
        "Parses the collective workloads' controller flags; None without --controller. Raises ShimError naming "
        "the flag and its bad value.");

  m.attr("STEP_UNKNOWN") = phase::OpDescriptor::kStepUnknown;

  py::class_<phase::Decision>(m, "Decision")
      .def_readonly("passed", &phase::Decision::passed)
      .def_readonly("reconfigured", &phase::Decision::reconfigured)
      .def_readonly("fallback", &phase::Decision::fallback)
      .def_readonly("provisioned", &phase::Decision::provisioned)
      .def_readonly("barrier", &phase::Decision::barrier)
      .def_readonly("wait_ms", &phase::Decision::wait_ms)
      .def_readonly("topo", &phase::Decision::topo);

  // Every call that may wait on the controller releases the GIL: other Python threads (a data
  // loader, gloo's own callbacks into Python) keep running while a rank waits for its topology.
  py::class_<phase::Shim>(m, "Shim")
      .def(py::init<phase::ShimOptions>(), py::arg("options"), py::call_guard<py::gil_scoped_release>(),
           "Connects to the controller and says hello; raises PhaseError when refused (wrong token, job, world "
           "size), ShimError when it cannot connect.")
      .def("add_group", &phase::Shim::add_group, py::arg("name"), py::arg("dim"), py::arg("ranks"),
           py::call_guard<py::gil_scoped_release>())
      .def(
          "pre_communication",
          [](phase::Shim& s, const std::string& group, const std::string& type, uint64_t bytes, int index) {
            return s.pre_communication({group, type, bytes, index});
          },
          py::arg("group"), py::arg("type"), py::arg("bytes"), py::arg("index"),
          py::call_guard<py::gil_scoped_release>())
      .def(
          "post_communication",
          [](phase::Shim& s, const std::string& group, const std::string& type, uint64_t bytes, int index) {
            s.post_communication({group, type, bytes, index});
          },
          py::arg("group"), py::arg("type"), py::arg("bytes"), py::arg("index"),
          py::call_guard<py::gil_scoped_release>())
      .def("close", &phase::Shim::close)
      .def_property_readonly("in_fallback", &phase::Shim::in_fallback)
      .def_property_readonly("fallback_reason", &phase::Shim::fallback_reason)
      .def_property_readonly("reports", &phase::Shim::reports)
      .def_property_readonly("samples", &samples_of, "{'columns': (...), 'rows': [tuple, ...]}")
      .def("write_csv", &phase::Shim::write_csv, py::arg("path"),
           "The Samples as the tidy CSV the C++ workloads write (timeline-compatible).");
  bind_rows_and_profiler(m);
}
