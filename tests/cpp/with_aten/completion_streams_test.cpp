// How the Completion helpers (transports/completion.h) order device streams, checked without a
// GPU. A device of our own (PrivateUse1) has a guard that runs nothing and logs what torch's
// Future asks of it: work queued on a stream, events recorded and waited, memory marked in use by
// a stream. Replaying that log gives, for every stream, the work it is ordered after; a waiter's
// stream must be ordered after every piece of work whose result it reads. A Completion that
// records no events, or only the last part's, passes every CPU test and reads stale data on a GPU
// (seen on an H200 in a coalesced all_gather_into_tensor before when_all combined every part).
#include "transports/completion.h"

#include <ATen/core/ivalue.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace c10d_func {
namespace {

constexpr c10::DeviceType kDevice = c10::DeviceType::PrivateUse1;
const c10::Device kDevice0(kDevice, 0);

// What the guard was asked to do, in order.
struct Step {
  enum Kind { kWork, kRecord, kBlock, kMarkUsed } kind;
  c10::StreamId stream;
  intptr_t event = 0;          // kRecord, kBlock
  std::string work;            // kWork
  const void* data = nullptr;  // kMarkUsed
};

std::mutex log_mutex;
std::vector<Step> steps;
std::atomic<intptr_t> next_event{0};
std::atomic<c10::StreamId> next_stream{100};
thread_local c10::StreamId current_stream = 0;

void log(Step step) {
  std::lock_guard<std::mutex> lock(log_mutex);
  steps.push_back(std::move(step));
}

class LoggingGuard final : public c10::impl::DeviceGuardImplInterface {
 public:
  c10::DeviceType type() const override { return kDevice; }
  c10::Device exchangeDevice(c10::Device) const override { return kDevice0; }
  c10::Device getDevice() const override { return kDevice0; }
  void setDevice(c10::Device) const override {}
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::UNSAFE, device, current_stream);
  }
  c10::Stream getDefaultStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::UNSAFE, device, 0);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool) const override {
    return c10::Stream(c10::Stream::UNSAFE, device, next_stream++);
  }
  c10::Stream exchangeStream(c10::Stream stream) const override {
    const c10::Stream previous(c10::Stream::UNSAFE, stream.device(), current_stream);
    current_stream = stream.id();
    return previous;
  }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex,
              const c10::EventFlag) const override {
    if (*event == nullptr) {
      *event = reinterpret_cast<void*>(++next_event);
    }
    log({Step::kRecord, stream.id(), reinterpret_cast<intptr_t>(*event)});
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (event != nullptr) {
      log({Step::kBlock, stream.id(), reinterpret_cast<intptr_t>(event)});
    }
  }
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  void recordDataPtrOnStream(const c10::DataPtr& data, const c10::Stream& stream) const override {
    log({Step::kMarkUsed, stream.id(), 0, "", data.get()});
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, LoggingGuard);

// Work queued on the calling thread's current stream (a collective's kernels, a finishing copy).
void queue_work(const std::string& name) {
  log({Step::kWork, current_stream, 0, name});
}

// Replays the log: the work each stream is ordered after.
std::map<c10::StreamId, std::set<std::string>> ordering() {
  std::lock_guard<std::mutex> lock(log_mutex);
  std::map<c10::StreamId, std::set<std::string>> after;
  std::map<intptr_t, std::set<std::string>> covered;
  for (const Step& step : steps) {
    switch (step.kind) {
      case Step::kWork:
        after[step.stream].insert(step.work);
        break;
      case Step::kRecord:
        covered[step.event] = after[step.stream];
        break;
      case Step::kBlock:
        after[step.stream].insert(covered[step.event].begin(), covered[step.event].end());
        break;
      case Step::kMarkUsed:
        break;
    }
  }
  return after;
}

// The streams on which `data` was marked in use.
std::set<c10::StreamId> marked_used(const void* data) {
  std::lock_guard<std::mutex> lock(log_mutex);
  std::set<c10::StreamId> streams;
  for (const Step& step : steps) {
    if (step.kind == Step::kMarkUsed && step.data == data) {
      streams.insert(step.stream);
    }
  }
  return streams;
}

// The stream the named work was queued on.
c10::StreamId stream_of(const std::string& work) {
  std::lock_guard<std::mutex> lock(log_mutex);
  for (const Step& step : steps) {
    if (step.kind == Step::kWork && step.work == work) {
      return step.stream;
    }
  }
  ADD_FAILURE() << "no work named " << work;
  return -1;
}

// A tensor of our device over `memory` (never read: the guard runs nothing).
at::Tensor device_tensor(void* memory) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 16, c10::DataPtr(memory, kDevice0),
                       /*allocator=*/nullptr, /*resizable=*/false);
  return at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      caffe2::TypeMeta::Make<float>());
}

// A collective's Future on our device, as a transport makes it: its value is its output.
Completion collective() {
  return c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors(),
                                                  std::vector<c10::Device>{kDevice0});
}

// Completes `future` as a transport thread does: its work queued on a stream of its own, then
// marked completed there (which records the Future's events on that stream).
void run_on_own_stream(const Completion& future, const std::string& work,
                       const at::Tensor& output) {
  const c10::impl::VirtualGuardImpl guard(kDevice);
  const c10::Stream previous = guard.exchangeStream(guard.getStreamFromGlobalPool(kDevice0));
  queue_work(work);
  future->markCompleted(c10::IValue(std::vector<at::Tensor>{output}));
  guard.exchangeStream(previous);
}

// What a waiter on a stream of its own is ordered after once it waited `completion`.
std::set<std::string> waiter_sees(const Completion& completion) {
  const c10::impl::VirtualGuardImpl guard(kDevice);
  const c10::Stream user = guard.getStreamFromGlobalPool(kDevice0);
  const c10::Stream previous = guard.exchangeStream(user);
  wait_completion(completion);
  guard.exchangeStream(previous);
  return ordering()[user.id()];
}

class CompletionStreams : public ::testing::Test {
 protected:
  void SetUp() override {
    std::lock_guard<std::mutex> lock(log_mutex);
    steps.clear();
  }
  float memory_[4][4] = {};
};

TEST_F(CompletionStreams, ThenRunOrdersTheWaiterAfterTheCollectiveAndTheFinishingStep) {
  at::Tensor output = device_tensor(memory_[0]);
  Completion upstream = collective();
  Completion done = then_run(upstream, output, {}, [] { queue_work("finish"); });
  run_on_own_stream(upstream, "collective", output);
  const auto seen = waiter_sees(done);
  EXPECT_TRUE(seen.count("collective")) << "the waiter may read before the collective wrote";
  EXPECT_TRUE(seen.count("finish")) << "the waiter may read before the finishing step wrote";
}

TEST_F(CompletionStreams, ThenRunMarksEveryTensorItUsesInUseByTheFinishingStream) {
  // The finishing step copies a staging buffer nobody else holds; once it drops the buffer, the
  // allocator must not hand its memory out before the queued copy ran.
  at::Tensor output = device_tensor(memory_[0]);
  at::Tensor staging = device_tensor(memory_[1]);
  Completion upstream = collective();
  Completion done = then_run(upstream, output, {staging}, [] { queue_work("copy back"); });
  staging = at::Tensor();
  run_on_own_stream(upstream, "collective", output);
  const c10::StreamId finishing = stream_of("copy back");
  EXPECT_TRUE(marked_used(memory_[1]).count(finishing))
      << "the staging buffer's memory may be reused while the copy from it is queued";
  EXPECT_TRUE(marked_used(memory_[0]).count(finishing));
}

TEST_F(CompletionStreams, DetachedOrdersTheWaiterAsItsUpstreamWould) {
  at::Tensor output = device_tensor(memory_[0]);
  Completion upstream = collective();
  Completion done = detached(upstream);
  run_on_own_stream(upstream, "collective", output);
  EXPECT_TRUE(waiter_sees(done).count("collective"))
      << "waiting the detached Completion orders nothing: the waiter may read stale data";
}

TEST_F(CompletionStreams, WhenAllOrdersTheWaiterAfterEveryPart) {
  // Three collectives, each finished by a step of its own: every step runs on a stream of its own,
  // so the last part's events cover only the last part.
  std::vector<Completion> upstreams;
  std::vector<Completion> parts;
  std::vector<at::Tensor> outputs;
  for (int i = 0; i < 3; ++i) {
    outputs.push_back(device_tensor(memory_[i]));
    upstreams.push_back(collective());
    const std::string name = "finish " + std::to_string(i);
    parts.push_back(then_run(upstreams.back(), outputs.back(), {}, [name] { queue_work(name); }));
  }
  Completion all = when_all(parts);
  for (int i : {1, 0, 2}) {  // out of order, as transports finish
    run_on_own_stream(upstreams[i], "collective " + std::to_string(i), outputs[i]);
  }
  const auto seen = waiter_sees(all);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(seen.count("collective " + std::to_string(i))) << "part " << i;
    EXPECT_TRUE(seen.count("finish " + std::to_string(i))) << "part " << i;
  }
}

TEST_F(CompletionStreams, WhenAllPassesTheFirstErrorOn) {
  Completion first = collective();
  Completion second = collective();
  Completion all = when_all({first, second});
  second->setError(std::make_exception_ptr(std::runtime_error("second failed")));
  first->setError(std::make_exception_ptr(std::runtime_error("first failed")));
  ASSERT_TRUE(all->completed());
  EXPECT_NE(all->tryRetrieveErrorMessage().find("second failed"), std::string::npos);
}

}  // namespace
}  // namespace c10d_func
