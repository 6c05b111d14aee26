// Forming an shm communicator: the members meet through the store, rank 0 creates the segment
// under a random name and the others map it; its name is unlinked once every member has mapped
// it. Also the host identities "auto" and "shm" decide by. See shm_communicator.h.
#include "transports/shm/shm_formation.h"

#include "transports/rank_format.h"
#include "transports/shm/cross_memory.h"
#include "transports/shm/shm_checks.h"
#include "transports/shm/shm_communicator.h"
#include "transports/shm/shm_layout.h"
#include "transports/shm/symmetric_pool.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include <sys/random.h>
#include <unistd.h>

namespace c10d_func {
namespace shm {
namespace {

uint64_t random_word() {
  uint64_t word = 0;
  size_t filled = 0;
  while (filled < sizeof(word)) {
    const ssize_t got =
        ::getrandom(reinterpret_cast<char*>(&word) + filled, sizeof(word) - filled, 0);
    TORCH_CHECK(got > 0 || errno == EINTR,
                "c10d_func shm: no random bytes for a segment name: ", std::strerror(errno));
    filled += got > 0 ? static_cast<size_t>(got) : 0;
  }
  return word;
}

// 128 random bits from the kernel: a name nobody can guess (the object is 0600 besides).
std::string random_segment_name() {
  std::ostringstream name;
  name << "/c10d_func_" << std::hex << random_word() << random_word() << "_" << std::dec
       << ::getpid();
  return name.str();
}

std::string text(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

// Each member's pid, as it wrote it in the segment, read once: only a positive one is a process
// (to PR_SET_PTRACER, 0 names nobody and -1 any process of the user). Every member reads every
// entry, its own too, so all fail alike.
std::vector<pid_t> checked_pids(const Rendezvous& rendezvous, const MemberControl* controls) {
  std::vector<pid_t> pids;
  for (int64_t m = 0; m < rendezvous.size; ++m) {
    const pid_t pid = controls[m].pid;
    TORCH_CHECK(pid > 0, "rank ", rendezvous.members.at(m),
                " published a bad pid in the shared segment (", pid,
                "): not a process; another version of c10d_func, or memory overwritten");
    pids.push_back(pid);
  }
  return pids;
}

// Each member probes every other once; cross-memory attach is used only when all could. Peers
// may attach to this member only while they probe: the permission ends once every member has
// said how its probes went. `pids`: checked_pids', named to Yama and probed.
bool agree_on_cross_memory(const Rendezvous& rendezvous, const MemberControl* controls,
                           const std::vector<pid_t>& pids) {
  bool mine = cross_memory_wanted();
  AttachPermission probing;
  if (attach_needs_permission()) {
    // Yama: each member lets exactly its peers attach, then says so; nobody probes before every
    // member has (a property of the host, so all members of it take this step).
    std::vector<pid_t> peers;
    for (int64_t m = 0; m < rendezvous.size; ++m) {
      if (m != rendezvous.rank) {
        peers.push_back(pids[m]);
      }
    }
    if (mine) {
      probing = allow_attach(peers);
    }
    store_all_gather(rendezvous, "attachable", {1});
  }
  for (int64_t m = 0; mine && m < rendezvous.size; ++m) {
    if (m != rendezvous.rank) {
      mine = controls[m].pid_ns == controls[rendezvous.rank].pid_ns &&
             probe(pids[m], controls[m].probe_address);
    }
  }
  const auto answers = store_all_gather(rendezvous, "cma", {static_cast<uint8_t>(mine ? 1 : 0)});
  return std::all_of(answers.begin(), answers.end(), [](const std::vector<uint8_t>& answer) {
    return answer == std::vector<uint8_t>{1};
  });
}

// A member other than rank 0: maps the segment the store names, once its record, owner, mode and
// header are checked. A refusal is also told to the others (as this member's "mapped" key), so
// that every member fails at once with the reason, not rank 0 at its timeout.
SharedSegment open_checked(const Rendezvous& rendezvous, std::string& name,
                           CheckedSegment& checked) {
  try {
    rendezvous.store->wait({"segment"}, rendezvous.remaining());
    const std::vector<uint8_t> value = rendezvous.store->get("segment");
    const SegmentRecord record = parse_segment_record(std::string_view(
        reinterpret_cast<const char*>(value.data()), std::min<size_t>(value.size(), 4096)));
    TORCH_CHECK(record.error.empty(), "the store's segment record is malformed (", record.error,
                "): another version of c10d_func, or something else wrote the key");
    name = record.name;
    SharedSegment segment = SharedSegment::open(name);
    const auto* header = reinterpret_cast<const Header*>(segment.base());
    SegmentHeaderValues seen;
    if (segment.size() >= sizeof(Header)) {
      seen = {header->magic, header->members, header->chunk_bytes, header->region_bytes,
              header->nonce};
    }
    const std::string wrong = check_segment_header(seen, static_cast<uint64_t>(rendezvous.size),
                                                   record.nonce, segment.size());
    TORCH_CHECK(wrong.empty(), "refusing segment ", name, ": ", wrong);
    checked.chunk_bytes = seen.chunk_bytes;
    checked.region_bytes = seen.region_bytes;
    return segment;
  } catch (const c10::Error& error) {
    const std::string why = "c10d_func shm: " + rendezvous.group + ": rank " +
                            std::to_string(rendezvous.members[rendezvous.rank]) + ": " +
                            error.what_without_backtrace();
    rendezvous.store->set("mapped/" + std::to_string(rendezvous.rank),
                          std::vector<uint8_t>(why.begin(), why.end()));
    // The name stays for the members still to open it (they find the same fault and say so);
    // rank 0 removes it once every member has answered.
    name.clear();
    TORCH_CHECK(false, why);
  }
}

std::shared_ptr<Communicator> form(const Rendezvous& rendezvous) {
  const int64_t n = rendezvous.size;
  std::string name;
  try {
    SharedSegment segment;
    CheckedSegment checked;
    if (rendezvous.rank == 0) {
      const size_t chunk = chunk_bytes_from_env();
      name = random_segment_name();
      const uint64_t nonce = random_word();
      const size_t region = pool_bound_bytes();
      segment = SharedSegment::create(name, segment_bytes(n, chunk, region));
      auto* header = reinterpret_cast<Header*>(segment.base());
      header->members = static_cast<uint64_t>(n);
      header->chunk_bytes = chunk;
      header->region_bytes = corrupts_for_test(ShmFault::kHeader, 0) ? uint64_t{1} << 62 : region;
      header->nonce = nonce;
      header->magic = kMagic;
      checked.chunk_bytes = chunk;
      checked.region_bytes = region;
      const std::string record = segment_record(name, nonce);
      rendezvous.store->set("segment", std::vector<uint8_t>(record.begin(), record.end()));
    } else {
      segment = open_checked(rendezvous, name, checked);
    }
    auto* controls = reinterpret_cast<MemberControl*>(segment.base() + controls_offset());
    controls[rendezvous.rank].pid =
        corrupts_for_test(ShmFault::kPid, rendezvous.rank) ? -1 : static_cast<int32_t>(::getpid());
    controls[rendezvous.rank].pid_ns = shm::pid_namespace();
    controls[rendezvous.rank].probe_address = probe_address();
    // Once every member has mapped the segment its name is removed: nothing is left in /dev/shm
    // by a crash, a kill or an exception from here on.
    // A member that refused the segment wrote why instead (cut: it is read from the store).
    const auto mapped = store_all_gather(rendezvous, "mapped", {1}, /*max_bytes=*/1000);
    SharedSegment::unlink(name);
    for (const auto& value : mapped) {
      TORCH_CHECK(value == std::vector<uint8_t>{1}, text(value));
    }
    checked.pids = checked_pids(rendezvous, controls);
    if (corrupts_for_test(ShmFault::kRewrite, rendezvous.rank)) {
      // Every member has checked the header (it said so in "mapped"): impossible sizes now.
      auto* header = reinterpret_cast<Header*>(segment.base());
      header->chunk_bytes = uint64_t{1} << 40;
      header->region_bytes = uint64_t{1} << 62;
    }
    const bool cross_memory = agree_on_cross_memory(rendezvous, controls, checked.pids);
    return communicator_on(std::move(segment), rendezvous, checked, cross_memory);
  } catch (...) {
    if (!name.empty()) {
      SharedSegment::unlink(name);
    }
    throw;
  }
}

}  // namespace
}  // namespace shm

std::shared_ptr<Communicator> make_shm_communicator(const Rendezvous& rendezvous) {
  const auto ids = exchange_host_identities(rendezvous);
  std::vector<int64_t> elsewhere;
  for (int64_t i = 0; i < rendezvous.size; ++i) {
    if (ids[i] != ids[rendezvous.rank]) {
      elsewhere.push_back(rendezvous.members[i]);
    }
  }
  TORCH_CHECK(elsewhere.empty(), "c10d_func: the shm transport needs every member of the group on ",
              "one host; ranks ", format_ranks(elsewhere), " run on another host than rank ",
              rendezvous.members[rendezvous.rank],
              ". Use set_transport('auto', 'cpu') (shm where it can, Gloo elsewhere) or 'gloo'");
  return form_shm_communicator(rendezvous.under("shm/"));
}

std::shared_ptr<Communicator> form_shm_communicator(const Rendezvous& rendezvous) {
  return shm::form(rendezvous);
}

std::vector<std::string> exchange_host_identities(const Rendezvous& rendezvous) {
  return store_all_gather_text(rendezvous, "host", shm::host_identity());
}

}  // namespace c10d_func
