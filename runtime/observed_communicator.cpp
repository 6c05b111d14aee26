// See observed_communicator.h.
#include "runtime/observed_communicator.h"

#include "transports/forwarding_communicator.h"

#include <cstdlib>
#include <string_view>

namespace c10d_func {
namespace {

class ObservedCommunicator final : public ForwardingCommunicator {
 public:
  ObservedCommunicator(std::shared_ptr<Communicator> transport,
                       std::shared_ptr<GroupObserver> observer)
      : ForwardingCommunicator(std::move(transport)),
        transport_(inner().backend_name()),
        observer_(std::move(observer)) {}

  const std::shared_ptr<GroupObserver>& observer() const { return observer_; }

  void set_timeout(std::chrono::milliseconds timeout) override {
    observer_->set_timeout(timeout);
    ForwardingCommunicator::set_timeout(timeout);
  }
  std::optional<Activity> activity() const override { return observer_->activity(); }

 private:
  Completion around(const Call& call, c10::function_ref<Completion()> issue) override {
    // A transport that found its own failure (a member died) tells the group at its next call.
    if (!marked_failed() && inner().failed()) {
      mark_failed(inner().failure().value_or("failed"));
    }
    return observer_->observe({transport_, call.op, call.inputs, call.outputs}, issue);
  }
  void on_failed(const std::string& reason) override {
    observer_->failed(reason);
    ForwardingCommunicator::on_failed(reason);
  }

  const std::string transport_;
  std::shared_ptr<GroupObserver> observer_;
};

// C10D_FUNC_OBSERVE=0, read once: no communicator is observed (no flight recorder entries, no
// profiler events, no counters), for measuring what observing costs.
bool observing() {
  static const bool enabled = [] {
    const char* value = std::getenv("C10D_FUNC_OBSERVE");
    return value == nullptr || std::string_view(value) != "0";
  }();
  return enabled;
}

}  // namespace

std::shared_ptr<Communicator> observed(std::shared_ptr<Communicator> inner, GroupIdentity identity,
                                       std::chrono::milliseconds timeout) {
  if (!inner || !observing() || dynamic_cast<ObservedCommunicator*>(inner.get()) != nullptr) {
    return inner;
  }
  identity.description += " " + inner->backend_name();  // "c10d_func shm"
  auto observer = std::make_shared<GroupObserver>(std::move(identity));
  observer->set_timeout(timeout);
  return std::make_shared<ObservedCommunicator>(std::move(inner), std::move(observer));
}

std::shared_ptr<GroupObserver> observer_of(const std::shared_ptr<Communicator>& communicator) {
  auto* found = dynamic_cast<ObservedCommunicator*>(communicator.get());
  return found != nullptr ? found->observer() : nullptr;
}

}  // namespace c10d_func
