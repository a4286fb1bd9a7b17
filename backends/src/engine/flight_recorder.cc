// FlightRecorder: see flight_recorder.h. The pickle goes through torch's own pickler, the same
// one torch's recorder uses, so the analyzer's plain pickle.load reads it.
#include "nccl_migrate/backends/flight_recorder.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>
#include <sstream>

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/serialization/pickle.h>

namespace nccl_migrate::backends {
namespace {

// torch's dump format version this writer follows.
constexpr const char* kDumpVersion = "2.10";
constexpr size_t kDefaultCapacity = 2000;

const char* firstEnv(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (const char* value = std::getenv(name); value && *value) return value;
  }
  return nullptr;
}

size_t capacityFromEnvironmentValue() {
  const char* value = firstEnv({"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"});
  if (!value) return kDefaultCapacity;
  try {
    long long n = std::stoll(value);
    return n < 0 ? 0 : static_cast<size_t>(n);
  } catch (const std::exception&) {
    TORCH_WARN("TORCH_FR_BUFFER_SIZE='", value, "' is not a number; using ", kDefaultCapacity);
    return kDefaultCapacity;
  }
}

// Dicts keyed by strings holding anything, as torch's own recorder builds them.
c10::impl::GenericDict newDict() { return c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get()); }

c10::IValue sizesOf(const std::vector<std::vector<int64_t>>& sizes) {
  c10::impl::GenericList out(c10::ListType::create(c10::ListType::ofInts()));
  for (const auto& s : sizes) out.push_back(c10::IValue(s));
  return out;
}

c10::IValue stringsOf(const std::vector<std::string>& values) {
  c10::impl::GenericList out(c10::StringType::get());
  for (const auto& v : values) out.push_back(v);
  return out;
}

std::string rankListText(const std::vector<uint64_t>& ranks) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < ranks.size(); ++i) out << (i ? ", " : "") << ranks[i];
  out << ']';
  return out.str();
}

c10::IValue entryValue(const FlightEntry& e) {
  auto d = newDict();
  d.insert("record_id", static_cast<int64_t>(e.recordId));
  d.insert("pg_id", static_cast<int64_t>(std::strtoll(e.groupName.c_str(), nullptr, 10)));
  d.insert("process_group", c10::ivalue::Tuple::create(e.groupName, e.groupDesc));
  d.insert("collective_seq_id", static_cast<int64_t>(e.collectiveSeq));
  d.insert("p2p_seq_id", static_cast<int64_t>(e.p2pSeq));
  d.insert("op_id", static_cast<int64_t>(e.opId));
  d.insert("is_p2p", e.isP2P);
  d.insert("profiling_name", e.profilingName);
  d.insert("time_created_ns", e.createdNs);
  d.insert("timeout_ms", e.timeoutMs);
  d.insert("input_sizes", sizesOf(e.inputSizes));
  d.insert("input_dtypes", stringsOf(e.inputDtypes));
  d.insert("output_sizes", sizesOf(e.outputSizes));
  d.insert("output_dtypes", stringsOf(e.outputDtypes));
  d.insert("state", e.state);
  d.insert("time_discovered_started_ns", e.startedNs ? c10::IValue(e.startedNs) : c10::IValue());
  d.insert("time_discovered_completed_ns", e.completedNs ? c10::IValue(e.completedNs) : c10::IValue());
  d.insert("retired", e.retired);
  d.insert("frames", c10::impl::GenericList(c10::AnyType::get()));
  if (e.completedNs && e.startedNs) d.insert("duration_ms", static_cast<double>(e.completedNs - e.startedNs) / 1e6);
  return d;
}

}  // namespace

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

// The profiling name's prefix: torch's is the backend's name (nccl2:all_reduce for the rewritten
// behaviour); a torch without nccl2 (2.11) has an analyzer (torchfrtrace) that accepts only
// "nccl" there.
std::string profilingPrefix(const std::string& backendName) {
#if NCCL_MIGRATE_TORCH_HAS_NCCL2
  return backendName;
#else
  (void)backendName;
  return "nccl";
#endif
}

std::string profilingNameOf(const IssuedOp& op) {
  std::string name = profilingPrefix(op.backendName) + ":" + op.name;
  if (!op.isP2P) return name;
  const char* arrow = op.name == "send" ? "->" : "<-";
  return name + " " + std::to_string(op.rank) + arrow + std::to_string(op.peer);
}

}  // namespace

FlightRecorder::FlightRecorder(size_t capacity) : capacity_(capacity) {}

size_t FlightRecorder::capacityFromEnvironment() { return capacityFromEnvironmentValue(); }

std::optional<uint64_t> FlightRecorder::onIssued(const IssuedOp& op) {
  if (op.inBatch || !enabled()) return std::nullopt;
  FlightEntry entry;
  entry.groupName = op.groupName;
  entry.groupDesc = op.groupDesc.empty() ? "undefined" : op.groupDesc;
  entry.collectiveSeq = op.collectiveSeq;
  entry.p2pSeq = op.p2pSeq;
  entry.opId = op.opId;
  entry.isP2P = op.isP2P;
  entry.profilingName = profilingNameOf(op);
  entry.createdNs = entry.startedNs = nowNs();
  entry.timeoutMs = op.timeout.count();
  for (const at::Tensor& t : op.inputs) {
    entry.inputSizes.push_back(t.sizes().vec());
    entry.inputDtypes.emplace_back(c10::toString(t.scalar_type()));
  }
  for (const at::Tensor& t : op.outputs) {
    entry.outputSizes.push_back(t.sizes().vec());
    entry.outputDtypes.emplace_back(c10::toString(t.scalar_type()));
  }
  entry.state = "started";
  return record(std::move(entry));
}

void FlightRecorder::onSettled(uint64_t recordId, const std::exception_ptr& error) {
  if (!error) markCompleted(recordId);
}

void FlightRecorder::registerGroup(const FlightGroup& group) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (FlightGroup& g : groups_) {
    if (g.name == group.name) {
      g = group;
      return;
    }
  }
  groups_.push_back(group);
}

std::optional<uint64_t> FlightRecorder::record(FlightEntry entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capacity_ == 0) return std::nullopt;
  entry.recordId = nextId_++;
  if (ring_.size() < capacity_) {
    ring_.push_back(std::move(entry));
  } else {
    ring_[entry.recordId % capacity_] = std::move(entry);
  }
  return nextId_ - 1;
}

void FlightRecorder::markCompleted(uint64_t recordId) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capacity_ == 0 || recordId + capacity_ < nextId_) return;  // already overwritten
  FlightEntry& e = ring_[recordId % capacity_];
  if (e.recordId != recordId) return;
  e.state = "completed";
  e.retired = true;
  e.completedNs = nowNs();
}

std::vector<FlightEntry> FlightRecorder::entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<FlightEntry> out;
  if (ring_.size() < capacity_) return ring_;
  for (size_t i = 0; i < capacity_; ++i) out.push_back(ring_[(nextId_ + i) % capacity_]);
  return out;
}

std::string FlightRecorder::dumpPickle() const {
  std::vector<FlightEntry> all = entries();
  std::vector<FlightGroup> groups;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    groups = groups_;
  }
  auto pgConfig = newDict();
  auto pgStatus = newDict();
  for (const FlightGroup& g : groups) {
    auto config = newDict();
    config.insert("name", g.name);
    config.insert("desc", g.desc);
    config.insert("ranks", rankListText(g.globalRanks));
    pgConfig.insert(g.name, config);
    auto status = newDict();
    int64_t enqueued = -1, completed = -1;
    for (const FlightEntry& e : all) {
      if (e.groupName != g.name || e.isP2P) continue;
      enqueued = std::max<int64_t>(enqueued, static_cast<int64_t>(e.collectiveSeq));
      if (e.state == "completed") completed = std::max<int64_t>(completed, static_cast<int64_t>(e.collectiveSeq));
    }
    status.insert("last_enqueued_collective", enqueued);
    status.insert("last_started_collective", enqueued);
    status.insert("last_completed_collective", completed);
    pgStatus.insert(g.name, status);
  }
  c10::impl::GenericList entryList(c10::AnyType::get());
  for (const FlightEntry& e : all) entryList.push_back(entryValue(e));
  auto dump = newDict();
  dump.insert("version", kDumpVersion);
  dump.insert("comm_lib_version", "nccl_migrate");
  dump.insert("pg_config", pgConfig);
  dump.insert("pg_status", pgStatus);
  dump.insert("entries", entryList);
  std::vector<char> bytes = torch::jit::pickle(c10::IValue(dump));
  return std::string(bytes.begin(), bytes.end());
}

std::string FlightRecorder::dumpToFile(uint64_t globalRank) const {
  std::string prefix;
  if (const char* p = firstEnv({"TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"})) {
    prefix = p;
  } else {
    const char* cache = firstEnv({"XDG_CACHE_HOME"});
    std::string base = cache ? cache : std::string(firstEnv({"HOME"}) ? firstEnv({"HOME"}) : "/tmp") + "/.cache";
    prefix = base + "/torch/comm_lib_trace_rank_";
  }
  std::string path = prefix + std::to_string(globalRank);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  removeAbandonedDumps(std::filesystem::path(path).parent_path());
  // Write then rename, so a reader never sees half a dump.
  std::string tmp = dumpTemporaryPath(path).string();
  bool written = false;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    TORCH_CHECK(out, "cannot write the flight recorder dump to ", tmp,
                "; set TORCH_FR_DUMP_TEMP_FILE to a writable path prefix");
    std::string bytes = dumpPickle();
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    written = static_cast<bool>(out.flush());
  }
  if (written) std::filesystem::rename(tmp, path, ec);
  if (!written || ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    TORCH_CHECK(false, "cannot ", written ? "move the flight recorder dump into place at " : "write the flight recorder dump to ",
                written ? path : tmp, written ? ": " + ec.message() : std::string());
  }
  return path;
}

namespace {

constexpr std::string_view kPartialStart = ".nccl-migrate-dump-";
constexpr std::string_view kPartialEnd = ".partial";

std::string hostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

// The writer of a partial dump named by dumpTemporaryPath: its host ("" in names written before
// the host was part of them) and pid, or nullopt for a name of another kind.
struct PartialWriter {
  std::string host;
  pid_t pid = 0;
};

std::optional<PartialWriter> writerOf(std::string_view name) {
  if (!name.starts_with(kPartialStart) || !name.ends_with(kPartialEnd)) return std::nullopt;
  name.remove_prefix(kPartialStart.size());
  name.remove_suffix(kPartialEnd.size());
  // <host>-<pid>-<n>, the host possibly holding dashes itself: read from the right.
  size_t countDash = name.rfind('-');
  if (countDash == std::string_view::npos || countDash == 0) return std::nullopt;
  std::string_view head = name.substr(0, countDash);
  size_t pidDash = head.rfind('-');
  std::string_view pidText = pidDash == std::string_view::npos ? head : head.substr(pidDash + 1);
  if (pidText.empty() || pidText.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  PartialWriter writer;
  long pid = 0;
  auto [end, error] = std::from_chars(pidText.data(), pidText.data() + pidText.size(), pid);
  if (error != std::errc() || end != pidText.data() + pidText.size() || pid <= 0 || pid > INT_MAX) return std::nullopt;
  writer.pid = static_cast<pid_t>(pid);
  if (pidDash != std::string_view::npos) writer.host = std::string(head.substr(0, pidDash));
  return writer;
}

bool processIsGone(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

}  // namespace

std::filesystem::path dumpTemporaryPath(const std::filesystem::path& target) {
  // Beside the target (a rename within one file system), named after neither its prefix nor its
  // rank: torchfrtrace reads every file whose name contains the prefix, anywhere, and takes the
  // rest as a rank, so a dump a process left half-written when it exited (or one being written
  // while it reads) must not look like one. The host and pid name the writer, so a later dump
  // can tell an abandoned file from one still being written (removeAbandonedDumps).
  static std::atomic<uint64_t> dumps{0};
  static const std::string host = hostName();
  return target.parent_path() / (std::string(kPartialStart) + host + "-" + std::to_string(::getpid()) + "-" +
                                 std::to_string(dumps++) + std::string(kPartialEnd));
}

void removeAbandonedDumps(const std::filesystem::path& dir) {
  // POSIX calls, not std::filesystem's iterators: torch 2.11's libtorch carries a copy of
  // std::filesystem of its own (see flight_recorder_test.cc).
  DIR* entries = ::opendir(dir.c_str());
  if (!entries) return;
  const std::string host = hostName();
  const std::time_t now = std::time(nullptr);
  while (const dirent* entry = ::readdir(entries)) {
    std::optional<PartialWriter> writer = writerOf(entry->d_name);
    if (!writer || writer->pid == ::getpid() || !processIsGone(writer->pid)) continue;
    if (!writer->host.empty() && writer->host != host) continue;  // another host's: its pid means nothing here
    // A pid is only known within this PID namespace: a container that shares the host name may
    // still be writing. A dump is written in seconds, so a file untouched this long is no one's.
    std::string path = (dir / entry->d_name).string();
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0 || now - info.st_mtime < kAbandonedDumpSeconds) continue;
    ::unlink(path.c_str());
  }
  ::closedir(entries);
}

}  // namespace nccl_migrate::backends
