// ocslab._shim: the Python face of the per-rank phase shim (ocslab/phase/shim.h) for the
// PyTorch backend (experiments/torch/ocslab/torch_backend.py). It binds the same C++ Shim and
// the same controller flags (--controller, --job, --controller-token-file, ...) the collective
// workloads parse, so the controller protocol and the token checks exist once, in C++.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <boost/program_options.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/phase/shim.h"
#include "ocslab/workloads/shim_hooks.h"

namespace py = pybind11;
namespace po = boost::program_options;
using namespace ocslab;

namespace {

// The collbench option set parsed from `args` (the same flags, the same errors naming them):
// None without --controller.
std::optional<phase::ShimOptions> shim_options(const std::vector<std::string>& args, int rank, int world,
                                               const std::string& host, int ack_wait_ms) {
  if (ack_wait_ms < 1) throw Error("ack wait " + std::to_string(ack_wait_ms) + " ms: want at least 1");
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
  // No phase table: the backend does not know step boundaries (yet), so nothing can be granted
  // ahead of its request; every op asks (docs/workloads.md, "Your own PyTorch job").
  if (o && o->mode == phase::ShimMode::kProvisioning) {
    throw Error("phase mode provisioning: the PyTorch backend runs on demand only (it does not know the step yet)");
  }
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
        py::arg("ack_wait_ms") = 60000,
        "Parses the collective workloads' controller flags; None without --controller. Raises ShimError naming "
        "the flag and its bad value.");

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
}
