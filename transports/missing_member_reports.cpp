// See missing_member_reports.h.
#include "transports/missing_member_reports.h"

#include <stdexcept>

namespace c10d_func {
namespace {

class MissingMemberReports final : public ForwardingCommunicator {
 public:
  MissingMemberReports(std::shared_ptr<Communicator> inner,
                       std::shared_ptr<FailureRollCall> roll_call)
      : ForwardingCommunicator(std::move(inner)), roll_call_(std::move(roll_call)) {}

 private:
  Completion around(const Call&, c10::function_ref<Completion()> issue) override {
    return explained_by(issue(), roll_call_);
  }

  std::shared_ptr<FailureRollCall> roll_call_;
};

}  // namespace

Completion explained_by(const Completion& upstream,
                        const std::shared_ptr<FailureRollCall>& roll_call) {
  auto done = c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get());
  upstream->addCallback([roll_call, done](c10::ivalue::Future& finished) {
    if (finished.hasError()) {
      // The roll call talks to the store; if that fails too, the collective's own error still
      // reaches the waiter (a Completion left unmarked would hang it).
      std::string why = finished.tryRetrieveErrorMessage();
      try {
        why = roll_call->explain(why);
      } catch (const std::exception& error) {
        why += " (the roll call failed: " + std::string(error.what()) + ")";
      }
      done->setError(std::make_exception_ptr(std::runtime_error(why)));
    } else {
      done->markCompleted();
    }
  });
  chain_deferred_wait(upstream, done);
  return done;
}

std::shared_ptr<Communicator> reporting_missing_members(
    std::shared_ptr<Communicator> inner, std::shared_ptr<FailureRollCall> roll_call) {
  return std::make_shared<MissingMemberReports>(std::move(inner), std::move(roll_call));
}

}  // namespace c10d_func
