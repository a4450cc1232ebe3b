#include "ocslab/emulator/link_delivery.h"

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "ocslab/common/clock.h"

namespace ocslab::emu {

namespace {

class AsyncLinkDriver : public LinkDriver {
 public:
  AsyncLinkDriver(std::unique_ptr<LinkDriver> inner, GroundTruth& truth, std::string nic_name)
      : inner_(std::move(inner)), truth_(truth), name_(std::move(nic_name)) {}

  ~AsyncLinkDriver() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void set_link(bool up) override {
    if (!thread_.joinable()) {
      deliver(up, monotonic_ns(), /*rethrow=*/true);
      thread_ = std::thread([this] { run(); });
      return;
    }
    {
      std::lock_guard lock(mutex_);
      queue_.push_back({up, monotonic_ns()});
    }
    wake_.notify_one();
  }

  std::string describe() const override { return inner_->describe() + " (on its own thread)"; }

 private:
  struct Change {
    bool up;
    int64_t asked_mono_ns;
  };

  void run() {
    for (;;) {
      Change c;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        c = queue_.front();
        queue_.pop_front();
      }
      deliver(c.up, c.asked_mono_ns, /*rethrow=*/false);
    }
  }

  void deliver(bool up, int64_t asked_mono_ns, bool rethrow) {
    try {
      inner_->set_link(up);
    } catch (const std::exception& e) {
      if (rethrow) throw;
      record_undelivered_link(truth_, name_, up, e);
      return;
    }
    truth_.record("emulator", name_, "link_delivery", static_cast<double>(monotonic_ns() - asked_mono_ns) / 1e6, "ms");
  }

  std::unique_ptr<LinkDriver> inner_;
  GroundTruth& truth_;
  std::string name_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Change> queue_;
  bool stopping_ = false;
  std::thread thread_;  // started after the first, synchronous delivery
};

}  // namespace

void record_undelivered_link(GroundTruth& truth, const std::string& nic_name, bool up, const std::exception& why) {
  spdlog::error("{}: link {} not delivered to the host: {}", nic_name, up ? "up" : "down", why.what());
  truth.record("emulator", nic_name, "link_driver_error", 1, "bool");
}

std::unique_ptr<LinkDriver> make_async_link_driver(std::unique_ptr<LinkDriver> inner, GroundTruth& truth,
                                                   std::string nic_name) {
  return std::make_unique<AsyncLinkDriver>(std::move(inner), truth, std::move(nic_name));
}

}  // namespace ocslab::emu
