#include "ocslab/probes/rx_power_probe.h"

#include <fmt/format.h>
#include <unistd.h>

#include <string_view>

#include "ocslab/common/clock.h"
#include "ocslab/common/error.h"
#include "ocslab/common/log.h"

namespace ocslab::probes {

namespace {

std::string local_host() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += "; ";
    out += p;
  }
  return out;
}

}  // namespace

RxPowerProbe::RxPowerProbe(RxPowerProbeConfig config, std::shared_ptr<EepromReader> reader)
    : config_(std::move(config)), reader_(std::move(reader)) {
  if (config_.host.empty()) config_.host = local_host();
  if (config_.interval.count() <= 0) {
    throw Error(fmt::format("rx_power probe interval must be positive, got {} ms", config_.interval.count()));
  }
}

RxPowerProbe::~RxPowerProbe() { stop(); }

std::string RxPowerProbe::setup(Interface& itf) {
  itf.ready = false;
  itf.image = EepromImage{};
  auto read_into = [&](const EepromRead& r) -> std::string {
    EepromReadResult res = reader_->read(itf.name, r);
    if (!res.ok()) return res.unavailable;
    itf.image.set(r.i2c_address, r.page, r.bank, r.offset, *res.bytes);
    return {};
  };
  if (auto why = read_into(kIdentifyRead); !why.empty()) return why;
  try {
    itf.type = module_type_from_identifier(itf.image.byte(0x50, 0, 0, 0));
    if (itf.type == ModuleType::kCmis && cmis_flat_memory(itf.image)) {
      return fmt::format("{}: CMIS module has flat memory (no page 11h lane monitors)", itf.name);
    }
    for (const auto& r : read_plan(itf.type).once) {
      if (auto why = read_into(r); !why.empty()) {
        // A refused read often has a cause the bytes already read can name (an SFP without
        // DDM has no A2h device at all); prefer that over the bare I/O error.
        try {
          decode_rx_power(itf.image);
        } catch (const Error& e) {
          if (std::string_view(e.what()).find("image too short") == std::string_view::npos) {
            return fmt::format("{}: {}", itf.name, e.what());
          }
        }
        return why;
      }
    }
    itf.banks = itf.type == ModuleType::kCmis ? cmis_banks_supported(itf.image) : 1;
    itf.plan = read_plan(itf.type, itf.banks);
  } catch (const Error& e) {
    return fmt::format("{}: {}", itf.name, e.what());
  }
  itf.ready = true;
  return {};
}

std::string RxPowerProbe::poll(Interface& itf, std::vector<Sample>& out) {
  for (const auto& r : itf.plan.each_poll) {
    EepromReadResult res = reader_->read(itf.name, r);
    if (!res.ok()) return res.unavailable;
    itf.image.set(r.i2c_address, r.page, r.bank, r.offset, *res.bytes);
  }
  Timestamp ts = now();
  RxPowerReading reading;
  try {
    reading = decode_rx_power(itf.image, itf.banks);
  } catch (const Error& e) {
    return fmt::format("{}: {}", itf.name, e.what());
  }
  auto emit = [&](const std::string& subject, const char* signal, double value, const char* unit) {
    out.push_back(Sample{ts.realtime_ns, ts.monotonic_ns, config_.host, "rx_power", subject, signal, value, unit});
  };
  for (const auto& lane : reading.rx) {
    std::string subject = fmt::format("{}/lane{}", itf.name, lane.lane);
    emit(subject, "rx_power_dbm", lane.mw > 0 ? lane.dbm : kSampleDbmFloor, "dBm");
    emit(subject, "rx_power_mw", lane.mw, "mW");
    if (lane.los) emit(subject, "los", *lane.los ? 1 : 0, "bool");
  }
  return {};
}

ProbeStatus RxPowerProbe::start(SampleSink sink) {
  if (started_) throw Error("rx_power probe started twice");
  started_ = true;
  ProbeStatus status;
  if (config_.interfaces.empty()) {
    status.reason = "rx_power: no interface configured";
    return status;
  }
  if (!reader_) {
    try {
      reader_ = std::make_shared<EthtoolEepromReader>();
    } catch (const Error& e) {
      status.reason = fmt::format("rx_power: cannot open the ethtool reader: {}", e.what());
      return status;
    }
  }
  status.method = reader_->method();

  std::vector<std::string> skipped;
  std::vector<std::string> formats;
  for (const auto& name : config_.interfaces) {
    Interface itf;
    itf.name = name;
    std::string why = setup(itf);
    if (why.empty()) why = poll(itf, first_);
    if (!why.empty()) {
      skipped.push_back(why);
      continue;
    }
    formats.push_back(fmt::format("{} {}", name, to_string(itf.type)));
    interfaces_.push_back(std::move(itf));
  }
  if (interfaces_.empty()) {
    status.reason = join(skipped);
    first_.clear();
    return status;
  }
  status.available = true;
  status.method += " (" + join(formats) + ")";
  if (!skipped.empty()) status.reason = "left out: " + join(skipped);
  sink_ = std::move(sink);
  stop_ = false;
  thread_ = std::thread([this] { run(); });
  return status;
}

void RxPowerProbe::run() {
  for (const auto& s : first_) sink_(s);
  first_.clear();
  auto next = std::chrono::steady_clock::now() + config_.interval;
  for (;;) {
    {
      std::unique_lock lk(mu_);
      if (cv_.wait_until(lk, next, [this] { return stop_; })) return;
    }
    std::vector<Sample> out;
    for (auto& itf : interfaces_) {
      // A module that went away is identified afresh: it may come back as another module.
      std::string why = itf.ready ? std::string() : setup(itf);
      if (why.empty()) why = poll(itf, out);
      bool readable = why.empty();
      if (!readable) {
        itf.ready = false;
        if (itf.reported) spdlog::warn("rx_power: {}", why);
      }
      if (readable != itf.reported) {
        Timestamp ts = now();
        out.push_back(Sample{ts.realtime_ns, ts.monotonic_ns, config_.host, "rx_power", itf.name, "module_readable",
                             readable ? 1.0 : 0.0, "bool"});
        itf.reported = readable;
      }
    }
    for (const auto& s : out) sink_(s);
    // Keep the grid; after a stall (slow I2C, suspended host) skip the missed ticks.
    next += config_.interval;
    auto t = std::chrono::steady_clock::now();
    if (next < t) next = t + config_.interval;
  }
}

void RxPowerProbe::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace ocslab::probes
