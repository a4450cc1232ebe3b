// Fault localisation (docs/experiments.md, "Fault localisation"): for each reconfiguration that
// did not complete, the host/interface whose chain of layers stopped first (NCCLX-style: the
// earliest divergence from the others), the layer it stopped at, and the evidence: its own
// edges with the timeline rows behind them and what the other ports did at that layer. A pure
// function of the breakdown (and of the timeline, for the rows' line numbers), so
// `ocslab analyze` says the same of any timeline as the run that wrote it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/analysis/breakdown.h"
#include "ocslab/analysis/timeline.h"

namespace ocslab::analysis {

// The chain a port goes through after a command, each layer needing the one before it: the
// switch acknowledges, light arrives, the NIC firmware's link comes up, the kernel's carrier,
// then RDMA traffic. kCapture is not a layer of the network: the host's capture had ended (a
// lost row), so where its chain stopped is not known; a port that stopped at a layer of the
// network is named before it.
enum class ChainLayer { kSwitch, kLight, kFirmware, kCarrier, kRdma, kCapture };
const char* chain_layer_name(ChainLayer l);  // "switch", "light", "firmware", "carrier", "rdma", "capture"

// Where a row's chain stopped: kSwitch for a failed row (no ack, or ack 0); for an incomplete
// row the first layer that went down and did not come back (a port coming up: the first awaited
// layer that did not come up); kCapture for a lost row; none for every other status (ok,
// unaffected, disconnected).
std::optional<ChainLayer> stopped_layer(const BreakdownRow& r);

// The switch ports in front of a host's NIC, where the caller knows them (0: not known).
struct SwitchPorts {
  int tx = 0, rx = 0;
  bool operator==(const SwitchPorts&) const = default;
};

// One port that did not complete, where its chain stopped, and the last edge it was seen at
// (empty: none at all after the command).
struct StoppedPort {
  std::string host, interface;
  ChainLayer layer = ChainLayer::kSwitch;
  std::optional<int64_t> last_edge_ns;
  bool operator==(const StoppedPort&) const = default;
};

// One fact behind a localisation; `line` is the timeline row it comes from (1 = header;
// 0 when it comes from the breakdown alone).
struct Evidence {
  uint32_t line = 0;
  std::string text;
  bool operator==(const Evidence&) const = default;
};

struct Localisation {
  std::string run;
  int iteration = 0;
  std::string mapping;
  // The earliest divergence: the stopped port whose chain stopped at the lowest layer, ties
  // broken by the earliest last edge, then by host and interface.
  std::string host, interface;
  std::optional<SwitchPorts> port;  // when the caller named the ports
  ChainLayer layer = ChainLayer::kSwitch;
  // Every port that took part stopped at this layer (at least two of them), or the switch did
  // not acknowledge: a cause they share (the switch, the light path), not one host's.
  bool common = false;
  size_t ports = 0;                  // ports that took part: not unaffected, not disconnected (meant to go dark)
  size_t resumed = 0;                // of them, ok
  std::vector<StoppedPort> stopped;  // every port that did not complete, the one named first
  std::optional<int64_t> t0_ns;      // what "+x ms" counts from: the command, else the first edge
  std::string verdict;               // one line: what and where
  std::vector<Evidence> evidence;
};

// One localisation per reconfiguration (run, iteration) with a failed or incomplete row, in the
// breakdown's order. `timeline`: the one the breakdown came from, for the evidence's line
// numbers (null: none); `ports`: the switch ports of each host/interface (null: none known).
std::vector<Localisation> localise(const Breakdown& b, const Timeline* timeline = nullptr,
                                   const std::map<Endpoint, SwitchPorts>* ports = nullptr);

}  // namespace ocslab::analysis
