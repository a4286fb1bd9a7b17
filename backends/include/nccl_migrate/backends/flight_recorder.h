// A flight recorder for every toolkit backend: the last TORCH_FR_BUFFER_SIZE ops of the
// process in a ring buffer, with torch's entry fields, dumped as torch's pickle format so that
// torch's own analyzer (torchfrtrace) reads it. One per process, like torch's (the process's
// EngineServices hold it), so one dump holds every group of the rank. It observes ops as any
// other observer does.
#pragma once

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "nccl_migrate/backends/op_observer.h"

namespace nccl_migrate::backends {

struct FlightGroup {
  std::string name;  // pg uid ("0", "1", ...)
  std::string desc;  // "default_pg", "undefined", ...
  std::vector<uint64_t> globalRanks;
};

struct FlightEntry {
  uint64_t recordId = 0;
  std::string groupName, groupDesc;
  uint64_t collectiveSeq = 0, p2pSeq = 0, opId = 0;
  bool isP2P = false;
  std::string profilingName;  // "nccl2:all_reduce", "nccl:send 0->1": the backend name, then the op
  int64_t createdNs = 0, startedNs = 0, completedNs = 0;
  int64_t timeoutMs = 0;
  std::vector<std::vector<int64_t>> inputSizes, outputSizes;
  std::vector<std::string> inputDtypes, outputDtypes;
  std::string state = "scheduled";  // scheduled | started | completed
  bool retired = false;
};

class FlightRecorder final : public OpObserver {
 public:
  // Holds the last `capacity` entries; 0 records nothing.
  explicit FlightRecorder(size_t capacity);
  // TORCH_FR_BUFFER_SIZE (alias TORCH_NCCL_TRACE_BUFFER_SIZE), default 2000.
  static size_t capacityFromEnvironment();

  bool enabled() const { return capacity_ > 0; }
  // One entry per op, as torch's recorder keeps them: members of a coalescing batch are recorded
  // as the batch's one "coalesced" entry, and a failed op stays "started" (a dump must show
  // where the rank stopped).
  std::optional<uint64_t> onIssued(const IssuedOp& op) override;
  void onSettled(uint64_t recordId, const std::exception_ptr& error) override;
  void registerGroup(const FlightGroup& group);
  // Returns the entry's id, or nullopt when disabled.
  std::optional<uint64_t> record(FlightEntry entry);
  void markCompleted(uint64_t recordId);

  std::vector<FlightEntry> entries() const;
  // torch's dump: {"version", "pg_config", "pg_status", "entries", "comm_lib_version"}, pickled.
  std::string dumpPickle() const;
  // Writes the dump to `<prefix><rank>`; the prefix comes from TORCH_FR_DUMP_TEMP_FILE (alias
  // TORCH_NCCL_DEBUG_INFO_TEMP_FILE), else ~/.cache/torch/comm_lib_trace_rank_. Returns the path.
  std::string dumpToFile(uint64_t globalRank) const;

 private:
  mutable std::mutex mutex_;
  size_t capacity_;
  uint64_t nextId_ = 0;
  std::vector<FlightEntry> ring_;  // ring_[id % capacity_]
  std::vector<FlightGroup> groups_;
};

// Nanoseconds since the epoch, the clock torch's entries use.
int64_t nowNs();

// Where a dump to `target` is written before it is renamed into place: beside it, under a name
// torchfrtrace never mistakes for a rank's dump.
// The name holds the writer's host and pid.
std::filesystem::path dumpTemporaryPath(const std::filesystem::path& target);

// Removes from `dir` the partial dumps whose writer died before it renamed them (a process
// killed mid-dump): this host's (or, in names from before hosts were in them, any host's) whose
// pid is gone and that nobody touched for kAbandonedDumpSeconds. Every dump runs it first, so a
// later run cleans what an earlier one left; fr and torchfrtrace never read them meanwhile
// (dumpTemporaryPath's names).
void removeAbandonedDumps(const std::filesystem::path& dir);
inline constexpr long kAbandonedDumpSeconds = 600;

}  // namespace nccl_migrate::backends
