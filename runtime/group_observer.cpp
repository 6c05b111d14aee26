// See group_observer.h.
#include "runtime/group_observer.h"

#include <torch/csrc/distributed/c10d/ParamCommsUtils.hpp>
#include <torch/csrc/distributed/c10d/logger.hpp>

#include <c10/util/StringUtil.h>

#include "runtime/flight_dumps.h"

#include <algorithm>

namespace c10d_func {
namespace {

// Apart from the ids torch's own backends take from 0 (ProcessGroupGloo's and ProcessGroupNCCL's
// local ids), so that the dump's pg_status keeps both.
std::atomic<size_t> next_flight_id{size_t{1} << 20};

int64_t bytes_of(at::TensorList tensors) {
  int64_t total = 0;
  for (const auto& tensor : tensors) {
    total += tensor.defined() ? static_cast<int64_t>(tensor.nbytes()) : 0;
  }
  return total;
}

int64_t numel_of(at::TensorList tensors) {
  int64_t total = 0;
  for (const auto& tensor : tensors) {
    total += tensor.defined() ? tensor.numel() : 0;
  }
  return total;
}

// A message rather than a collective: it has a peer, or it is a recv from any source (whose
// peer is known only once a message is taken).
bool is_message(const ObservedCall& call) {
  return call.peer >= 0 || call.op == "recvAnySource";
}

// "<lib>:<op>", and "<lib>:send <rank>-><peer>" / "<lib>:recv <rank><-<peer>" for messages,
// with group-local ranks: how torch names a collective, and how its analyzer parses the name.
std::string collective_name(std::string_view lib, const ObservedCall& call, int64_t rank) {
  // No ':' in the library's part: the analyzer splits the name at the one ':'.
  std::string prefix(lib);
  std::replace(prefix.begin(), prefix.end(), ':', '_');
  if (call.peer < 0) {
    return c10::str(prefix, ":", call.op);
  }
  return c10::str(prefix, ":", call.op, " ", rank, call.op == "send" ? "->" : "<-", call.peer);
}

// The flight recorder's name of a call: torch's analyzer (fr_trace) accepts only the libraries it
// knows, so the family of the device stands for the transport there ("gloo" for every CPU
// transport, "nccl" for CUDA); the transport is in the group's description.
std::string flight_name(const ObservedCall& call, int64_t rank) {
  const at::TensorList any = call.inputs.empty() ? call.outputs : call.inputs;
  const bool on_cuda = !any.empty() && any[0].defined() && any[0].is_cuda();
  return collective_name(on_cuda ? "nccl" : "gloo", call, rank);
}

// torch's comms metadata names a group's ranks as (start, stride); -1 where they are no range.
std::pair<int, int> rank_range(const std::vector<int64_t>& members) {
  if (members.empty()) {
    return {-1, -1};
  }
  const int64_t stride = members.size() > 1 ? members[1] - members[0] : 1;
  for (size_t i = 1; i < members.size(); ++i) {
    if (members[i] - members[i - 1] != stride || stride <= 0) {
      return {-1, -1};
    }
  }
  return {static_cast<int>(members[0]), static_cast<int>(stride)};
}

}  // namespace

GroupObserver::GroupObserver(GroupIdentity identity)
    : identity_(std::move(identity)),
      flight_name_(identity_.name, identity_.description),
      flight_id_(next_flight_id.fetch_add(1)),
      status_(std::make_shared<c10d::ProcessGroupStatus>()) {
  flight_record_group(flight_name_, identity_.members);
  if (identity_.rank >= 0 && identity_.rank < static_cast<int64_t>(identity_.members.size())) {
    watch_for_flight_dumps(identity_.store, identity_.members[identity_.rank]);
  }
}

GroupObserver::~GroupObserver() = default;

GroupObserver::InFlight GroupObserver::begin(const ObservedCall& call) {
  InFlight flight;
  collectives_.fetch_add(1, std::memory_order_relaxed);
  bytes_.fetch_add(std::max(bytes_of(call.inputs), bytes_of(call.outputs)),
                   std::memory_order_relaxed);
  const bool profiling = at::hasCallbacks() && at::isRecordFunctionEnabled();
  if (profiling) {
    flight.name = collective_name(call.transport, call, identity_.rank);
  }
  if (flight_recorder_enabled() || profiling) {
    // Sequence ids for the recorder's entry and the profiler's comms metadata alike.
    std::lock_guard<std::mutex> lock(sequence_mutex_);
    (is_message(call) ? p2p_seq_ : collective_seq_) += 1;
    flight.sequence = is_message(call) ? -1 : static_cast<int64_t>(collective_seq_);
    flight.collective_seq = collective_seq_;
    flight.p2p_seq = p2p_seq_;
    flight.op_id = op_id_++;
  }
  if (flight_recorder_enabled()) {
    FlightRecordArgs args;
    args.pg_id = flight_id_;
    args.pg_name = flight_name_;
    args.profiling_name = flight_name(call, identity_.rank);
    args.inputs = call.inputs.vec();
    args.outputs = call.outputs.vec();
    args.timeout = std::chrono::milliseconds(timeout_ms_.load(std::memory_order_relaxed));
    args.status = status_;
    args.p2p = is_message(call);
    args.collective_seq_id = flight.collective_seq;
    args.p2p_seq_id = flight.p2p_seq;
    args.op_id = flight.op_id;
    // Recorded under the sequence lock: entries of one group keep their issue order.
    std::lock_guard<std::mutex> lock(sequence_mutex_);
    flight.entry = flight_record(args);
    if (!args.p2p) {
      status_->lastEnqueuedSeq = flight.sequence;
      status_->lastEnqueuedWorkName = args.profiling_name;
    }
  }
  {
    std::lock_guard<std::mutex> lock(busy_mutex_);
    flight.started = std::chrono::steady_clock::now();
    if (in_flight_++ == 0) {
      busy_since_ = flight.started;
    }
  }
  return flight;
}

void GroupObserver::end(InFlight& flight, const std::optional<std::string>& error) {
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(busy_mutex_);
    if (--in_flight_ == 0) {
      busy_ += now - busy_since_;
    }
    if (error) {
      last_error_ = *error;
    }
  }
  if (flight.entry) {
    const double duration_ms =
        std::chrono::duration<double, std::milli>(now - flight.started).count();
    flight_completed(*flight.entry, !error, duration_ms);
    flight.entry.reset();
    if (!error && flight.sequence >= 0) {
      std::lock_guard<std::mutex> lock(sequence_mutex_);
      status_->lastCompletedSeq = std::max(status_->lastCompletedSeq, flight.sequence);
    }
  }
}

void GroupObserver::settle(InFlight flight, const Completion& done) {
  if (flight.entry && flight.sequence >= 0) {
    std::lock_guard<std::mutex> lock(sequence_mutex_);
    status_->lastStartedSeq = std::max(status_->lastStartedSeq, flight.sequence);
  }
  if (done->completed() && done->devices().empty()) {
    // Done in the call: end() marks the entry started and completed under one lock.
    end(flight, done->hasError() ? std::optional<std::string>(done->tryRetrieveErrorMessage())
                                 : std::nullopt);
    return;
  }
  if (flight.entry) {
    flight_started(*flight.entry);
  }
  // The callback is stored in a std::function, which must be copyable.
  auto pending = std::make_shared<InFlight>(std::move(flight));
  done->addCallback(
      [self = shared_from_this(), flight = std::move(pending)](c10::ivalue::Future& finished) {
        self->end(*flight, finished.hasError()
                               ? std::optional<std::string>(finished.tryRetrieveErrorMessage())
                               : std::nullopt);
      });
}

std::shared_ptr<void> GroupObserver::comms_metadata(const ObservedCall& call,
                                                    const InFlight& flight) {
  // The macro declares its guards in this scope; they live on in the returned holder, which the
  // caller keeps while it issues the collective.
  struct Scope {
    Scope(const ObservedCall& call, const InFlight& flight, const GroupObserver& group)
        : ranks(rank_range(group.identity_.members)),
          info(std::make_shared<torch::ParamCommsDebugInfo>(
              group.flight_name_, static_cast<int>(rank_field(call, group)), std::string(call.op),
              numel_of(call.inputs), numel_of(call.outputs),
              call.inputs.empty() ? at::kByte : call.inputs[0].scalar_type(),
              std::vector<int64_t>{}, std::vector<int64_t>{}, ranks.first, ranks.second,
              // No trailing isAsynchronizedOp: torch 2.11 has none; where it exists
              // (2.14) it defaults to true, what a collective with a Work is.
              static_cast<int>(group.identity_.members.size()))),
          guard(c10::DebugInfoKind::PARAM_COMMS_INFO, info),
          event(at::RecordScope::USER_SCOPE) {
      if (event.isActive()) {
        inputs = {c10::IValue(call.inputs.vec()),
                  c10::IValue(static_cast<int64_t>(flight.collective_seq)),
                  c10::IValue(group.flight_name_),
                  c10::IValue(rank_field(call, group)),
                  c10::IValue(std::string(call.op)),
                  c10::IValue(std::vector<int64_t>{}),
                  c10::IValue(std::vector<int64_t>{}),
                  c10::IValue(static_cast<int64_t>(ranks.first)),
                  c10::IValue(static_cast<int64_t>(ranks.second)),
                  c10::IValue(static_cast<int64_t>(group.identity_.members.size())),
                  c10::IValue(true)};
        event.before(at::kParamCommsCallName, &inputs);
        event.setOutputs(std::vector<c10::IValue>{c10::IValue(call.outputs.vec())});
      }
    }
    // The record's rank: a message's peer (the profiler shows it as "Dst Rank" of a send and
    // "Src Rank" of a recv, as torch's NCCL records its p2p), this member for a collective.
    static int64_t rank_field(const ObservedCall& call, const GroupObserver& group) {
      return call.peer >= 0 ? call.peer : group.identity_.rank;
    }
    std::pair<int, int> ranks;
    std::shared_ptr<torch::ParamCommsDebugInfo> info;
    c10::DebugInfoGuard guard;
    std::vector<c10::IValue> inputs;  // the event reads them where it is recorded
    at::RecordFunction event;
  };
  return std::make_shared<Scope>(call, flight, *this);
}

Activity GroupObserver::activity() const {
  Activity activity;
  activity.collectives = collectives_.load(std::memory_order_relaxed);
  activity.bytes = bytes_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(busy_mutex_);
  auto busy = busy_;
  if (in_flight_ > 0) {
    busy += std::chrono::steady_clock::now() - busy_since_;
  }
  activity.busy_seconds = std::chrono::duration<double>(busy).count();
  activity.last_error = last_error_;
  return activity;
}

void GroupObserver::failed(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(busy_mutex_);
    last_error_ = reason;
  }
  if (identity_.rank >= 0 && identity_.rank < static_cast<int64_t>(identity_.members.size())) {
    dump_flight_recorders_everywhere(identity_.store, identity_.members[identity_.rank]);
  }
}

}  // namespace c10d_func
