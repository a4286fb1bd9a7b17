// SimNcclApi: see sim_nccl.h.
#include "sim_nccl.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "sim_nccl_memory.h"
#include "sim_reduction.h"

namespace nccl_migrate::sim {

struct PreMul {
  ncclScalarResidence_t residence;
  double hostValue = 0.0;          // read when the op was created
  const void* devicePtr = nullptr;  // read when the op runs
  ncclDataType_t type;
};

struct SimComm {
  std::string id;
  int size = 0;
  int rank = 0;
  std::atomic<bool> freed{false};
  std::atomic<bool> aborted{false};
  std::atomic<ncclResult_t> asyncError{ncclSuccess};
  bool nonblocking = false;  // config.blocking == 0: calls may return ncclInProgress
  std::mutex mutex;
  uint64_t collectives = 0;
  std::map<int, uint64_t> sends, recvs;
  std::map<int, PreMul> preMuls;
  int nextRedOp = ncclNumOps;
  // What NCCL connected on first use: each collective algorithm's channels, and each p2p
  // direction (sender, receiver). Only the thread launching the communicator's groups touches them.
  std::set<std::string> algorithmsConnected;
  std::set<std::pair<int, int>> directionsConnected;
  // The device memory NCCL allocates for it (sim_nccl_memory.h), and what the device was charged
  // so far: init's, then each connect's; all of it goes back when the communicator is freed.
  std::optional<NcclMemoryModel> memory;
  std::atomic<size_t> chargedBytes{0};
  std::atomic<int> queued{0};       // ops on a stream the stream has not passed yet
  std::atomic<int> callsInside{0};  // threads inside a call naming this communicator
};

// A nonblocking job's end (init's or a launch's) stores its result as the communicator's state
// (group.cc 611 and 629 / 730 and 749, ncclCommSetAsyncError). A call made before the
// communicator was ready stores ncclInvalidArgument meanwhile (src/enqueue.cc 2661 / 3170, the
// `fail:` path of ncclEnqueueCheck). NCCL stores both unconditionally, so the one that lands last
// holds: the communicator stays failed when the job ended between the call's check and its
// store. The simulation always keeps the call's: a communicator that took a call before it was
// ready stays failed, the outcome that keeps the misuse visible.
void settle(SimComm& comm, ncclResult_t result) {
  ncclResult_t expected = ncclInProgress;
  comm.asyncError.compare_exchange_strong(expected, result);
}

struct SimNcclApi::Op {
  enum Kind { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, Send, Recv } kind;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t redOp = ncclSum;
  std::optional<PreMul> preMul;
  int root = 0;  // root of rooted collectives; the peer of send and recv
  SimComm* comm = nullptr;
  SimStream* stream = nullptr;
  std::string key;  // where its data meets its peers' in the store
  bool collective() const { return kind != Send && kind != Recv; }
};

namespace {

// Charges the simulated device what NCCL allocates for `comm`.
void charge(SimRuntime& runtime, SimComm& comm, size_t bytes) {
  comm.chargedBytes += bytes;
  runtime.usedBytes += bytes;
}
// How long freeing a communicator waits for the store to hear its listener closed (closeListener).
constexpr std::chrono::milliseconds kCloseListenerWait{200};

thread_local int groupDepth = 0;
thread_local std::vector<SimNcclApi::Op> deferredOps;
// The first error of a call inside the thread's group: the outermost ncclGroupEnd answers it and
// launches nothing (ncclGroupErrCheck, src/include/group.h; ncclGroupEndInternal's
// `if ((ret = ncclGroupError) != ncclSuccess) goto fail`, src/group.cc 671 / 790).
thread_local ncclResult_t groupError = ncclSuccess;
// Communicators whose ncclCommAbort was called inside a group on this thread: NCCL queues the
// abort's reclaim in the group (ncclAsyncLaunch, src/group.cc 37 / 40) and runs it at the outermost
// group end.
thread_local std::vector<SimComm*> deferredReclaims;

at::ScalarType scalarTypeOf(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: return at::kChar;
    case ncclUint8: return at::kByte;
    case ncclInt32: return at::kInt;
    case ncclInt64: return at::kLong;
    case ncclFloat16: return at::kHalf;
    case ncclFloat32: return at::kFloat;
    case ncclFloat64: return at::kDouble;
    case ncclBfloat16: return at::kBFloat16;
    case ncclFloat8e4m3: return at::kFloat8_e4m3fn;
    case ncclFloat8e5m2: return at::kFloat8_e5m2;
    default: TORCH_CHECK(false, "simulated NCCL: data type ", static_cast<int>(type), " is not simulated");
  }
}

size_t bytesOf(size_t count, ncclDataType_t type) { return count * c10::elementSize(scalarTypeOf(type)); }

at::Tensor viewOf(const void* data, size_t count, ncclDataType_t type) {
  return at::from_blob(const_cast<void*>(data), {static_cast<int64_t>(count)}, at::TensorOptions().dtype(scalarTypeOf(type)));
}

std::vector<uint8_t> bytesAt(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  return std::vector<uint8_t>(p, p + bytes);
}

double scalarValue(const void* data, ncclDataType_t type) { return viewOf(data, 1, type).item<double>(); }

// The reduction NCCL's kernels compute, in the element type (sim_reduction.h).
at::Tensor reduced(const std::vector<at::Tensor>& parts, const SimNcclApi::Op& op) {
  std::optional<double> factor;
  if (op.preMul) {
    factor = op.preMul->residence == ncclScalarDevice ? scalarValue(op.preMul->devicePtr, op.preMul->type)
                                                      : op.preMul->hostValue;
  }
  return reducedInElementType(parts, op.redOp, factor);
}

void writeTo(void* data, const at::Tensor& values, ncclDataType_t type) {
  viewOf(data, static_cast<size_t>(values.numel()), type).copy_(values);
}

// Waits until `key` is in the store; false when the communicator was aborted meanwhile.
bool arrived(c10d::Store& store, SimComm& comm, const std::string& key) {
  auto pause = std::chrono::microseconds(100);
  while (!store.check({key})) {
    if (comm.aborted.load()) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
  return true;
}

// Whether the process `pid` is gone (or a zombie: dead, not yet reaped), so that nothing listens
// on its bootstrap socket any more.
bool processGone(int pid) {
  std::FILE* stat = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!stat) return true;
  int readPid = 0;
  char state = 0;
  // The second field, the command name, is in parentheses and may hold blanks: skip to ") ".
  int matched = std::fscanf(stat, "%d (%*[^)]) %c", &readPid, &state);
  std::fclose(stat);
  return matched == 2 && (state == 'Z' || state == 'X');
}

// NCCL's first look at its parameters loads its config files into the process environment
// (initEnv, src/misc/param.cc 54-74 / 52-72, once per process): the file NCCL_CONF_FILE names,
// else ~/.nccl.conf, then /etc/nccl.conf. Each line NAME=VALUE (a line starting with '#', or
// without '=', is skipped; the value runs to the end of the line, its newline and, in 2.30.7, a
// carriage return cut) is set with setenv(name, value, 0): the environment wins over both files,
// and the first file over /etc/nccl.conf. The home directory is $HOME (2.30.7; 2.28.9 asks
// getpwuid, the same for a job's user). Lines are read whole (2.30.7 reads at most 4095 bytes
// of one), names and values cut at 1023 bytes.
void setEnvFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "r");
  if (!file) return;
  char* line = nullptr;
  size_t capacity = 0;
  ssize_t read = 0;
  while ((read = getline(&line, &capacity, file)) != -1) {
    std::string text(line, static_cast<size_t>(read));
    if (!text.empty() && text.back() == '\n') text.pop_back();
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.empty() || text[0] == '#') continue;
    size_t equals = text.find('=');
    if (equals == std::string::npos) continue;
    std::string name = text.substr(0, std::min<size_t>(equals, 1023));
    std::string value = text.substr(equals + 1, 1023);
    setenv(name.c_str(), value.c_str(), 0);
  }
  std::free(line);
  std::fclose(file);
}

// ncclGetEnv: the config files first, once (ncclInitEnv -> initEnv), then the variable. NCCL's
// environment plugins (src/plugin/env.cc) are not simulated: the default one reads getenv.
const char* ncclGetEnv(const char* name) {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* userFile = std::getenv("NCCL_CONF_FILE");
    if (userFile && *userFile) {
      setEnvFile(userFile);
    } else if (const char* home = std::getenv("HOME")) {
      setEnvFile(std::string(home) + "/.nccl.conf");
    }
    setEnvFile("/etc/nccl.conf");
  });
  return std::getenv(name);
}

long environmentOr(const char* name, long fallback) {
  const char* value = ncclGetEnv(name);
  if (!value || !*value) return fallback;
  char* end = nullptr;
  long parsed = std::strtol(value, &end, 10);
  return end && *end == 0 && parsed >= 0 ? parsed : fallback;
}

// How a connect on first use to a peer ends.
enum class Connect { Made, Aborted, PeerGone };

// NCCL's connect exchanges with each peer through the bootstrap network, each rank sending
// before it receives (ncclTransportP2pSetup, src/transport.cc: bootstrapSend then bootstrapRecv,
// 178-188 in v2.28.9). A send to a peer whose process is gone finds no listener: its connect
// gets ECONNREFUSED, retried NCCL_SOCKET_RETRY_CNT times (34) with a sleep growing by
// NCCL_SOCKET_RETRY_SLEEP_MSEC (100 ms) each time, then fails with ncclRemoteError
// (socketConnectCheck, src/misc/socket.cc, 571-595): about a minute by default. A peer that
// lives and never connects is waited for until the abort flag is set (bootstrapRecv); one that
// freed its communicator (abort or destroy) closed its listener, and is refused the same way.
Connect connectWith(c10d::Store& store, SimComm& comm, const std::string& key, int peer) {
  std::string pidKey = comm.id + "/pid/" + std::to_string(peer);
  int peerPid = 0;
  auto pause = std::chrono::microseconds(100);
  auto lastLook = std::chrono::steady_clock::now();
  while (!store.check({key})) {
    if (comm.aborted.load()) return Connect::Aborted;
    if (std::chrono::steady_clock::now() - lastLook > std::chrono::milliseconds(20)) {
      lastLook = std::chrono::steady_clock::now();
      if (!peerPid && store.check({pidKey})) {
        std::vector<uint8_t> bytes = store.get(pidKey);
        peerPid = std::atoi(std::string(bytes.begin(), bytes.end()).c_str());
      }
      bool listenerClosed = store.check({comm.id + "/closed/" + std::to_string(peer)});
      if (listenerClosed || (peerPid && processGone(peerPid))) {
        long retries = environmentOr("NCCL_SOCKET_RETRY_CNT", 34);
        long sleepMs = environmentOr("NCCL_SOCKET_RETRY_SLEEP_MSEC", 100);
        auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(sleepMs * retries * (retries + 1) / 2);
        while (std::chrono::steady_clock::now() < until) {
          if (comm.aborted.load()) return Connect::Aborted;
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        return Connect::PeerGone;
      }
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
  return Connect::Made;
}

// NCCL allows one thread at a time to operate a communicator (user guide, "Thread Safety": no
// NCCL operations on a single communicator in parallel from several threads), and
// ncclCommAbort frees the communicator a call on another thread may still use (commReclaim,
// src/init.cc). A call that begins while another thread is inside one on the same communicator
// ends the process with a message, as the use-after-free check does.
class OneThreadAtATime {
 public:
  OneThreadAtATime(ncclComm_t comm, const char* call) : comm_(reinterpret_cast<SimComm*>(comm)) {
    if (comm_ && comm_->callsInside.fetch_add(1) > 0) {
      std::fprintf(stderr, "simulated NCCL: %s while another thread is inside a call on the same communicator\n", call);
      std::fflush(stderr);
      std::abort();
    }
  }
  ~OneThreadAtATime() {
    if (comm_) --comm_->callsInside;
  }
  OneThreadAtATime(const OneThreadAtATime&) = delete;
  OneThreadAtATime& operator=(const OneThreadAtATime&) = delete;

 private:
  SimComm* comm_;
};

// ncclCommEnsureReady, which every call that enqueues work, ncclRedOpCreatePreMulSum and
// ncclCommDestroy start with (src/init.cc 373-390 / 422-439): the communicator's state, where
// ncclInProgress (init or a launch still running) reads as ncclInvalidArgument ("Attempt to
// use communicator before the previous operation returned ncclSuccess") and any other error is
// kept as it is. (With the abort flag set it joins the running job instead: only ncclCommAbort
// comes here then.)
ncclResult_t ensureReady(const SimComm& comm) {
  ncclResult_t state = comm.asyncError.load();
  return state == ncclInProgress ? ncclInvalidArgument : state;
}

// ncclGroupErrCheck (src/include/group.h): inside a group, a call's error becomes the group's,
// which the outermost ncclGroupEnd answers.
ncclResult_t failed(ncclResult_t result) {
  if (groupDepth > 0 && result != ncclSuccess && result != ncclInProgress) groupError = result;
  return result;
}

[[noreturn]] void useAfterFree(const char* call) {
  std::fprintf(stderr, "simulated NCCL: %s on a communicator that ncclCommAbort or ncclCommDestroy already freed\n",
               call);
  std::fflush(stderr);
  std::abort();
}

}  // namespace

Faults faultsFromEnvironment() {
  Faults faults;
  if (const char* v = std::getenv("NCCL_MIGRATE_SIM_STALL_AT"); v && *v) faults.stallAt = std::stoull(v);
  if (const char* v = std::getenv("NCCL_MIGRATE_SIM_ASYNC_ERROR_AT"); v && *v) faults.asyncErrorAt = std::stoull(v);
  return faults;
}

SimNcclApi::SimNcclApi(c10::intrusive_ptr<c10d::Store> store, std::shared_ptr<SimRuntime> runtime, Faults faults)
    : store_(std::move(store)), runtime_(std::move(runtime)), faults_(faults) {}

const char* SimNcclApi::errorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclSystemError: return "simulated system error (a peer never arrived, or became unreachable)";
    case ncclRemoteError: return "simulated remote error (injected)";
    case ncclInvalidUsage: return "invalid usage";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInProgress: return "in progress";
    default: return "simulated NCCL error";
  }
}

void SimNcclApi::note(const char* call) {
  std::lock_guard<std::mutex> lock(callsMutex_);
  calls_.emplace_back(call);
}

std::vector<std::string> SimNcclApi::calls() {
  std::lock_guard<std::mutex> lock(callsMutex_);
  return calls_;
}

SimComm* SimNcclApi::live(ncclComm_t comm, const char* call) {
  note(call);
  auto* sim = reinterpret_cast<SimComm*>(comm);
  if (!sim) return nullptr;
  if (sim->freed.load()) useAfterFree(call);
  return sim;
}

ncclResult_t SimNcclApi::getUniqueId(ncclUniqueId* id) {
  note("ncclGetUniqueId");
  (void)ncclGetEnv("NCCL_CONF_FILE");  // ncclGetUniqueId starts with ncclInitEnv (src/init.cc 159 / v2.28.9)
  std::memset(id, 0, sizeof(*id));
  std::random_device random;
  std::snprintf(id->internal, sizeof(id->internal), "sim-%08x%08x", random(), random());
  return ncclSuccess;
}

namespace {

// ncclParamCommBlocking: NCCL_PARAM(CommBlocking, "COMM_BLOCKING", NCCL_CONFIG_UNDEF_INT)
// (src/init.cc 56 / 60). ncclLoadParam reads it through ncclGetEnv (so from the config files
// too) with strtoll in base 0, takes the default for a value that sets errno, and caches what
// it read at the first read for the rest of the process (src/misc/param.cc 76-94 / 78-106):
// changing the variable later changes nothing. (2.30.7's NCCL_NO_CACHE, which can turn the
// cache off per parameter, is not simulated.)
int64_t commBlockingParam() {
  static std::once_flag once;
  static int64_t cached = NCCL_CONFIG_UNDEF_INT;
  std::call_once(once, [] {
    const char* value = ncclGetEnv("NCCL_COMM_BLOCKING");
    if (!value || !*value) return;
    errno = 0;
    long long parsed = std::strtoll(value, nullptr, 0);
    if (errno == 0) cached = parsed;
  });
  return cached;
}

// The mode NCCL gives a new communicator: the parameter, stored in an int, overrides the
// config's blocking when it is 0 or 1 (envConfigOverride, src/init.cc 1647-1649 / 1998-2000).
bool nonblockingMode(const ncclConfig_t* config) {
  int blocking = config ? config->blocking : NCCL_CONFIG_UNDEF_INT;
  int blockingEnv = static_cast<int>(commBlockingParam());
  if (blockingEnv == 0 || blockingEnv == 1) blocking = blockingEnv;
  return blocking == 0;
}

}  // namespace

ncclResult_t SimNcclApi::commInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                            ncclConfig_t* config) {
  note("ncclCommInitRankConfig");
  if (rank < 0 || rank >= nranks) return ncclInvalidArgument;
  // What NCCL will allocate; a config NCCL refuses (its maxCTAs or minCTAs) is refused here too.
  std::optional<int> maxCtas, minCtas;
  if (config && config->maxCTAs != NCCL_CONFIG_UNDEF_INT) maxCtas = config->maxCTAs;
  if (config && config->minCTAs != NCCL_CONFIG_UNDEF_INT) minCtas = config->minCTAs;
  std::optional<NcclMemoryModel> memory;
  try {
    memory.emplace(simulatedNodeShape(nranks, rank, maxCtas, minCtas));
  } catch (const std::invalid_argument&) {
    return ncclInvalidArgument;
  }
  auto* sim = new SimComm();  // never deleted: a freed communicator stays as a tombstone
  sim->memory = std::move(memory);
  sim->id = std::string(id.internal, strnlen(id.internal, sizeof(id.internal)));
  sim->size = nranks;
  sim->rank = rank;
  *comm = reinterpret_cast<ncclComm_t>(sim);
  charge(*runtime_, *sim, sim->memory->initBytes());
  ++liveCommunicators_;
  {
    std::lock_guard<std::mutex> lock(commsMutex_);
    made_.push_back(sim);
  }
  // Every member announces itself under the id and waits for the others: members holding
  // different ids wait on different names until the store gives up.
  auto rendezvous = [store = store_, sim] {
    std::string pid = std::to_string(getpid());  // where its bootstrap listens, for connectWith
    store->set(sim->id + "/pid/" + std::to_string(sim->rank), std::vector<uint8_t>(pid.begin(), pid.end()));
    store->set(sim->id + "/init/" + std::to_string(sim->rank), std::vector<uint8_t>{1});
    std::vector<std::string> keys;
    for (int r = 0; r < sim->size; ++r) keys.push_back(sim->id + "/init/" + std::to_string(r));
    try {
      store->wait(keys);
      return ncclSuccess;
    } catch (const std::exception&) {
      return ncclSystemError;
    }
  };
  if (nonblockingMode(config)) {
    sim->nonblocking = true;
    sim->asyncError = ncclInProgress;
    std::thread([sim, rendezvous] { settle(*sim, rendezvous()); }).detach();
    return ncclInProgress;
  }
  return rendezvous();
}

void SimNcclApi::failWhileIdle(ncclResult_t error) {
  std::lock_guard<std::mutex> lock(commsMutex_);
  for (SimComm* sim : made_) {
    ncclResult_t expected = ncclSuccess;
    if (!sim->freed.load()) sim->asyncError.compare_exchange_strong(expected, error);
  }
}

ncclResult_t SimNcclApi::commGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  SimComm* sim = live(comm, "ncclCommGetAsyncError");
  if (!sim) return ncclInvalidArgument;
  *state = sim->asyncError.load();
  return ncclSuccess;
}

// Freeing a communicator closes its bootstrap listener (commFree -> bootstrapClose, which closes
// the listen socket; src/init.cc 282 and src/bootstrap.cc 1195, v2.28.9): a peer connecting to it
// later is refused, as by a process that is gone (connectWith). Said through the store, when it
// still answers. Closing a socket is local, NCCL's caller waits on no one for it, while a store
// call can wait (torch's TCPStore whose host is gone waits out a reverse DNS lookup, 5 s where no
// resolver answers), which would hold an abort no real one is held: the store is told on a thread
// of its own, waited for a moment at most. (Not at all would let a process that exits right after
// cut a FileStore's record short, which its other readers then misread.)
void SimNcclApi::closeListener(const SimComm& sim) {
  struct Telling {
    std::mutex mutex;
    std::condition_variable done;
    bool told = false;
  };
  auto telling = std::make_shared<Telling>();
  std::thread([store = store_, key = sim.id + "/closed/" + std::to_string(sim.rank), telling] {
    try {
      store->set(key, std::vector<uint8_t>{1});
    } catch (const std::exception&) {
      // the store is gone too: no peer can be waiting on it
    }
    std::lock_guard<std::mutex> lock(telling->mutex);
    telling->told = true;
    telling->done.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(telling->mutex);
  telling->done.wait_for(lock, kCloseListenerWait, [&] { return telling->told; });
}

// ncclCommAbort sets the abort flags first (setCommAbortFlags), so kernels and connects waiting
// on peers give up (src/init.cc, ncclCommAbort, 2503 / 3025, the flags at 2515 / 3037).
// Then it reclaims the communicator as ncclCommDestroy does (commReclaim -> commDestroySync,
// src/init.cc 2304 / 2824 and 2212 / 2730), synchronizing NCCL's device stream (2225 / 2744),
// which waits for every kernel launched on the communicator's stream (finishedEvent, src/enqueue.cc
// 1701, 1725 / 1886, 1915). So it waits until the stream has passed the communicator's ops: those
// running give up at the flag, but one the stream has not reached (queued behind the job's stream,
// which waits on another communicator's stuck op) holds the abort until that one is aborted too.
ncclResult_t SimNcclApi::commAbort(ncclComm_t comm) {
  OneThreadAtATime inside(comm, "ncclCommAbort");
  SimComm* sim = live(comm, "ncclCommAbort");
  if (!sim) return ncclInvalidArgument;
  sim->aborted = true;  // this communicator's flag only: its ops waiting on peers give up
  // Inside a group on this thread (one a failed ncclCommDestroy left open, see commDestroy)
  // NCCL's reclaim waits for the outermost group end.
  if (groupDepth > 0) {
    deferredReclaims.push_back(sim);
    return ncclSuccess;
  }
  reclaim(*sim);
  return ncclSuccess;
}

void SimNcclApi::reclaim(SimComm& sim) {
  while (sim.queued.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (sim.freed.exchange(true)) return;
  closeListener(sim);
  runtime_->usedBytes -= sim.chargedBytes.load();
  --liveCommunicators_;
}

// ncclCommDestroy sets no abort flag: its reclaim synchronizes NCCL's streams and frees the
// communicator's device memory (commReclaim -> commDestroySync, ncclStrongStreamSynchronize;
// commCleanup; src/init.cc, ncclCommDestroy 2358 / 2879), which waits for the kernels still
// running, so it returns only once the stream has passed the communicator's ops: never while
// one is stalled on a peer. Before that it asks ncclCommEnsureReady (2381 / 2901): a
// communicator still ncclInProgress answers ncclInvalidArgument, one holding an error answers
// that error, and NCCLCHECK returns it at once, freeing nothing (the listener stays open) and
// skipping the ncclGroupEndInternal that matches its ncclGroupStartInternal (2373 / 2892): the
// calling thread stays one group level up.
ncclResult_t SimNcclApi::commDestroy(ncclComm_t comm) {
  OneThreadAtATime inside(comm, "ncclCommDestroy");
  SimComm* sim = live(comm, "ncclCommDestroy");
  if (!sim) return ncclInvalidArgument;
  if (faults_.errorAtDestroy) {
    ncclResult_t expected = ncclSuccess;
    sim->asyncError.compare_exchange_strong(expected, *faults_.errorAtDestroy);
  }
  ++groupDepth;
  if (ncclResult_t ready = ensureReady(*sim); ready != ncclSuccess) return ready;
  --groupDepth;
  reclaim(*sim);
  return ncclSuccess;
}

ncclResult_t SimNcclApi::redOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t type,
                                              ncclScalarResidence_t residence, ncclComm_t comm) {
  SimComm* sim = live(comm, residence == ncclScalarDevice ? "ncclRedOpCreatePreMulSum(device)"
                                                          : "ncclRedOpCreatePreMulSum(host)");
  if (!sim) return ncclInvalidArgument;
  // It joins no init: it asks ncclCommEnsureReady and returns what that answers (src/enqueue.cc 2669 / v2.28.9).
  if (ncclResult_t ready = ensureReady(*sim); ready != ncclSuccess) return ready;
  PreMul preMul{residence, 0.0, nullptr, type};
  if (residence == ncclScalarHostImmediate) {
    preMul.hostValue = scalarValue(scalar, type);
  } else {
    preMul.devicePtr = scalar;
  }
  std::lock_guard<std::mutex> lock(sim->mutex);
  int id = sim->nextRedOp++;
  sim->preMuls[id] = preMul;
  *op = static_cast<ncclRedOp_t>(id);
  ++livePreMulSums_;
  return ncclSuccess;
}

ncclResult_t SimNcclApi::redOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  SimComm* sim = live(comm, "ncclRedOpDestroy");
  if (!sim) return ncclInvalidArgument;
  std::lock_guard<std::mutex> lock(sim->mutex);
  if (sim->preMuls.erase(static_cast<int>(op)) == 0) return ncclInvalidArgument;
  --livePreMulSums_;
  return ncclSuccess;
}

ncclResult_t SimNcclApi::groupStart() {
  note("ncclGroupStart");
  ++groupDepth;
  return ncclSuccess;
}

ncclResult_t SimNcclApi::groupEnd() {
  note("ncclGroupEnd");
  if (groupDepth == 0) return ncclInvalidUsage;
  if (--groupDepth > 0) return ncclSuccess;
  std::vector<Op> ops = std::move(deferredOps);
  deferredOps.clear();
  std::vector<SimComm*> reclaims = std::move(deferredReclaims);
  deferredReclaims.clear();
  for (SimComm* sim : reclaims) reclaim(*sim);
  if (ncclResult_t failedCall = std::exchange(groupError, ncclSuccess); failedCall != ncclSuccess) {
    return failedCall;  // groupCleanup drops the group's tasks
  }
  // Launching a group's ops on a communicator freed meanwhile is a use after free in NCCL.
  for (const Op& op : ops) {
    if (op.comm->freed.load()) useAfterFree("ncclGroupEnd");
  }
  std::vector<std::unique_ptr<OneThreadAtATime>> inside;
  std::set<SimComm*> comms;
  for (const Op& op : ops) {
    if (comms.insert(op.comm).second) {
      inside.push_back(std::make_unique<OneThreadAtATime>(reinterpret_cast<ncclComm_t>(op.comm), "ncclGroupEnd"));
    }
  }
  return launch(std::move(ops));
}

// NCCL's group launch (groupLaunch, src/group.cc): first the connections the group's ops need
// and NCCL has not made, then the kernels. In blocking mode it runs on the calling thread, so the
// call returns only once the peers connected too. In nonblocking mode ncclGroupEndInternal runs
// it on a thread of its own and answers ncclInProgress, and ncclCommGetAsyncError says
// ncclInProgress until it finished (v2.28.9 and v2.30.7); the communicator takes no call meanwhile.
ncclResult_t SimNcclApi::launch(std::vector<Op> ops) {
  if (ops.empty()) return ncclSuccess;
  std::set<SimComm*> comms;
  for (const Op& op : ops) comms.insert(op.comm);
  bool nonblocking = std::any_of(comms.begin(), comms.end(), [](SimComm* c) { return c->nonblocking; });
  if (!nonblocking) return connectAndQueue(ops);
  for (SimComm* comm : comms) comm->asyncError = ncclInProgress;
  ++inProgressReturns_;
  std::thread([self = shared_from_this(), ops = std::move(ops), comms] {
    ncclResult_t result = self->connectAndQueue(ops);
    for (SimComm* comm : comms) settle(*comm, result);
  }).detach();
  return ncclInProgress;
}

ncclResult_t SimNcclApi::connectAndQueue(const std::vector<Op>& ops) {
  if (ncclResult_t connected = connect(ops); connected != ncclSuccess) return connected;
  // One task per stream: its ops post everything first and then collect, so grouped sends and
  // receives (and several collectives) progress together.
  std::map<SimStream*, std::vector<Op>> byStream;
  for (const Op& op : ops) byStream[op.stream].push_back(op);
  for (auto& [stream, streamOps] : byStream) {
    queue(stream, streamOps);
  }
  return ncclSuccess;
}

// NCCL connects on first use, and waits for the peers to connect too:
// - a collective algorithm's channels, the first time a launch uses the algorithm, where NCCL
//   connects at run time (comm->runtimeConn = cuMemSupport && NCCL_RUNTIME_CONNECT, default 1:
//   src/init.cc, initTransportsRank, 1269 / 1552; ncclPrepareTasks in src/enqueue.cc marks the
//   algorithm, 453 / 495, and groupLaunch runs ncclCollPreconnect, src/group.cc);
// - a p2p direction, the first time a send or receive uses it, in every mode (p2pTaskAppend marks
//   connectSend / connectRecv, src/enqueue.cc 2436-2443 / 2672-2680; groupLaunch runs
//   ncclP2PPreconnectFunc -> ncclTransportP2pSetup, src/group.cc 135-141 / 138-144).
// The exchange goes through NCCL's bootstrap network, which waits for the peer until it comes
// or the communicator's abort flag is set. The simulation connects an algorithm the first time a
// launch uses it (algorithmOf), and waits there for every member (NCCL's ring and tree wait for
// their neighbours only); a p2p direction waits for its peer. A one-rank communicator connects
// nothing.
// The algorithm the simulation picks for a collective: tree for an all_reduce of at most 256 KiB,
// ring for a larger one and for every other collective. NCCL picks from the collective's kind,
// reduction, type and bytes with the communicator's topology (getAlgoInfo and its tuning tables,
// src/enqueue.cc and src/graph/tuning.cc), for the collectives of a group that share kind,
// reduction and type from their bytes together; the simulation takes each op's own bytes, and
// only as many algorithms as it needs to show that a later collective can connect again.
std::string SimNcclApi::algorithmOf(const Op& op) {
  constexpr size_t kTreeBytes = size_t(256) << 10;
  if (op.kind == Op::AllReduce && bytesOf(op.count, op.type) <= kTreeBytes) return "tree";
  return "ring";
}

ncclResult_t SimNcclApi::connect(const std::vector<Op>& ops) {
  struct Pending {
    SimComm* comm;
    std::vector<std::pair<std::string, int>> awaited;  // each key with the peer that sets it
  };
  std::vector<Pending> pending;
  c10d::Store& store = *store_;
  try {
    for (const Op& op : ops) {
      SimComm& comm = *op.comm;
      if (comm.size == 1) continue;
      std::string base = comm.id + "/connect/";
      Pending wait{&comm, {}};
      if (op.collective() && comm.algorithmsConnected.insert(algorithmOf(op)).second) {
        // What NCCL allocates to connect the algorithm (sim_nccl_memory.h).
        charge(*runtime_, comm, comm.memory->connect(algorithmOf(op) == "tree" ? Algorithm::Tree : Algorithm::Ring));
        // once per launch too: a group's collectives of one algorithm connect together
        std::string at = base + "coll/" + algorithmOf(op) + "/";
        store.set(at + std::to_string(comm.rank), std::vector<uint8_t>{1});
        for (int r = 0; r < comm.size; ++r) wait.awaited.emplace_back(at + std::to_string(r), r);
      }
      if (!op.collective()) {
        std::pair<int, int> direction = op.kind == Op::Send ? std::make_pair(comm.rank, op.root)
                                                            : std::make_pair(op.root, comm.rank);
        if (direction.first != direction.second && comm.directionsConnected.insert(direction).second) {
          charge(*runtime_, comm,
                 op.kind == Op::Send ? comm.memory->connectSend(op.root) : comm.memory->connectRecv(op.root));
          std::string at = base + "p2p/" + std::to_string(direction.first) + "-" + std::to_string(direction.second) + "/";
          store.set(at + std::to_string(comm.rank), std::vector<uint8_t>{1});
          wait.awaited.emplace_back(at + std::to_string(op.root), op.root);
        }
      }
      if (!wait.awaited.empty()) pending.push_back(std::move(wait));
    }
    for (const Pending& wait : pending) {
      for (const auto& [key, peer] : wait.awaited) {
        Connect made = connectWith(store, *wait.comm, key, peer);
        if (made == Connect::Aborted) return ncclSystemError;
        if (made == Connect::PeerGone) return ncclRemoteError;
      }
    }
  } catch (const std::exception&) {
    return ncclSystemError;  // the store carrying the bootstrap is gone: the peers are unreachable
  }
  return ncclSuccess;
}

void SimNcclApi::queue(SimStream* stream, std::vector<Op> ops) {
  // An op captured into a graph runs on replay, never now (the simulated device drops a captured
  // stream's work): counted as queued it would keep a destroy waiting for it forever.
  if (stream->isCapturing()) return;
  for (const Op& op : ops) ++op.comm->queued;
  stream->enqueue([self = shared_from_this(), ops] {
    self->run(ops);
    for (const Op& op : ops) --op.comm->queued;
  });
}

// NCCL launches a one-rank communicator's collective when it is called, inside a group or not:
// taskAppend issues it as ncclLaunchOneRank (a copy, a scaling kernel or nothing) and adds no task
// for the group's end (src/enqueue.cc, taskAppend, v2.28.9 and v2.30.7). Sends and receives, and
// every call of a larger communicator, wait for the outermost ncclGroupEnd.
bool SimNcclApi::launchesWhenCalled(const Op& op) { return op.collective() && op.comm->size == 1; }

ncclResult_t SimNcclApi::submit(Op op) {
  static const char* kCallNames[] = {"ncclAllReduce", "ncclBroadcast", "ncclReduce", "ncclAllGather",
                                     "ncclReduceScatter", "ncclSend", "ncclRecv"};
  if (faults_.failCall == kCallNames[op.kind] && !failCallSpent_.exchange(true)) return failed(ncclInternalError);
  if (ncclResult_t ready = ensureReady(*op.comm); ready != ncclSuccess) {
    // ncclEnqueueCheck's `fail:` path: a nonblocking communicator keeps the error as its state.
    if (op.comm->nonblocking) op.comm->asyncError = ready;
    return failed(ready);
  }
  // NCCL discards a collective of no elements at the call: taskAppend returns before it appends a
  // task or counts an op ("Empty collectives can be discarded", src/enqueue.cc, v2.28.9 and
  // v2.30.7), so peers that never call it are not waited for. Sends and receives are not.
  if (op.collective() && op.count == 0) return ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(op.comm->mutex);
    const std::string& id = op.comm->id;
    int me = op.comm->rank;
    switch (op.kind) {
      case Op::Send:
        op.key = id + "/p/" + std::to_string(me) + "-" + std::to_string(op.root) + "/" +
                 std::to_string(op.comm->sends[op.root]++);
        break;
      case Op::Recv:
        op.key = id + "/p/" + std::to_string(op.root) + "-" + std::to_string(me) + "/" +
                 std::to_string(op.comm->recvs[op.root]++);
        break;
      default:
        op.key = id + "/c/" + std::to_string(++op.comm->collectives);
    }
    if (op.redOp >= ncclNumOps && op.collective()) {
      auto it = op.comm->preMuls.find(static_cast<int>(op.redOp));
      if (it == op.comm->preMuls.end()) return ncclInvalidArgument;
      op.preMul = it->second;  // captured now: the op may be destroyed once enqueued
    }
  }
  if (groupDepth == 0) return launch({std::move(op)});  // NCCL's implicit group ends here
  // Inside a group NCCL's own implicit group end only leaves a level (ncclEnqueueCheck), so the
  // call answers ncclSuccess; the outermost ncclGroupEnd launches and answers for the group.
  if (launchesWhenCalled(op)) {
    queue(op.stream, {op});
  } else {
    deferredOps.push_back(std::move(op));
  }
  return ncclSuccess;
}

namespace {

std::string partKey(const SimNcclApi::Op& op, int rank) { return op.key + "/" + std::to_string(rank); }

// What decides how a collective moves data: its kind, element count and type. NCCL exchanges
// none of it: each rank's kernel moves its own count in steps and waits for its peers' steps
// (Primitives::waitPeer, src/device/prims_simple.h, 109-117 / 101-109, spinning until the peer's
// step counter advances or the abort flag is set). Ranks that posted different shapes for one
// op are never matched by NCCL; the simulation makes them wait, as kernels that never get the
// steps they expect.
std::string shapeKey(const SimNcclApi::Op& op, int rank) { return op.key + "/shape/" + std::to_string(rank); }
std::vector<uint8_t> shapeOf(const SimNcclApi::Op& op) {
  std::string shape = std::to_string(op.kind) + ":" + std::to_string(op.count) + ":" + std::to_string(op.type);
  return std::vector<uint8_t>(shape.begin(), shape.end());
}

bool anyAborted(const std::vector<SimNcclApi::Op>& ops) {
  return std::any_of(ops.begin(), ops.end(), [](const SimNcclApi::Op& op) { return op.comm->aborted.load(); });
}

// The bytes an op contributes, read from its send buffer while the stream is at the op; none
// for a receive or a broadcast off its root (a send of no elements contributes an empty value).
std::optional<std::vector<uint8_t>> contributionOf(const SimNcclApi::Op& op) {
  switch (op.kind) {
    case SimNcclApi::Op::AllReduce:
    case SimNcclApi::Op::Reduce:
    case SimNcclApi::Op::AllGather:
    case SimNcclApi::Op::Send: return bytesAt(op.send, bytesOf(op.count, op.type));
    case SimNcclApi::Op::ReduceScatter: return bytesAt(op.send, bytesOf(op.count * op.comm->size, op.type));
    case SimNcclApi::Op::Broadcast:
      if (op.comm->rank == op.root) return bytesAt(op.send, bytesOf(op.count, op.type));
      return std::nullopt;
    case SimNcclApi::Op::Recv: return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

// What the ops of one launch exchange through the store, apart from their buffers: the network
// part of the ops. It runs on a thread of its own, so that an abort releases the stream at once
// even while a store call is stuck (torch's store names a failed peer by a reverse DNS lookup,
// which can take the resolver's timeout), as ncclCommAbort ends kernels waiting on dead peers.
struct SimNcclApi::Exchange {
  std::vector<Op> ops;                              // their buffer pointers are never used here
  std::vector<std::optional<std::vector<uint8_t>>> contributions;  // one per op
  std::vector<std::optional<at::Tensor>> results;   // what each op writes to its receive buffer
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  bool complete = false;  // false: a communicator was aborted before every part arrived
  std::exception_ptr failure;  // the store's, or a type the simulation does not know
};

std::shared_ptr<SimNcclApi::Exchange> SimNcclApi::startExchange(const std::vector<Op>& ops) {
  auto exchange = std::make_shared<Exchange>();
  exchange->ops = ops;
  for (Op& op : exchange->ops) {
    exchange->contributions.push_back(contributionOf(op));
    // A device-resident PREMUL_SUM factor is read when the op runs, as NCCL reads it.
    if (op.preMul && op.preMul->residence == ncclScalarDevice) {
      op.preMul->hostValue = scalarValue(op.preMul->devicePtr, op.preMul->type);
      op.preMul->residence = ncclScalarHostImmediate;
    }
  }
  std::thread([self = shared_from_this(), exchange] {
    std::exception_ptr failure;
    bool complete = false;
    try {
      complete = self->transfer(*exchange);
    } catch (...) {
      failure = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(exchange->mutex);
    exchange->done = true;
    exchange->complete = complete;
    exchange->failure = failure;
    exchange->finished.notify_all();
  }).detach();
  return exchange;
}

void SimNcclApi::run(const std::vector<Op>& ops) {
  // Faults are counted per collective of this rank's communicator.
  for (const Op& op : ops) {
    if (!op.collective()) continue;
    uint64_t n = std::stoull(op.key.substr(op.key.rfind('/') + 1));
    if (faults_.asyncErrorAt && n == *faults_.asyncErrorAt) op.comm->asyncError = ncclRemoteError;
    if ((faults_.stallAt && n == *faults_.stallAt) || (faults_.asyncErrorAt && n == *faults_.asyncErrorAt)) {
      while (!op.comm->aborted.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return;
    }
  }
  if (anyAborted(ops)) return;  // queued behind an abort: nothing left to exchange
  std::shared_ptr<Exchange> exchange;
  std::exception_ptr failure;
  try {
    exchange = startExchange(ops);
  } catch (...) {
    failure = std::current_exception();
  }
  std::unique_lock<std::mutex> lock;
  if (exchange) {
    lock = std::unique_lock<std::mutex>(exchange->mutex);
    while (!exchange->done) {
      if (anyAborted(ops)) return;  // released by the abort; the exchange ends on its own
      exchange->finished.wait_for(lock, std::chrono::milliseconds(1));
    }
    failure = exchange->failure;
  }
  if (failure) {
    // The store carries the simulated transfers. When it fails (the rank hosting it died), the
    // peers are unreachable: NCCL reports that as its asynchronous error and the op never
    // completes; it never ends the process. Like a stalled op, only the abort releases the stream.
    for (const Op& op : ops) op.comm->asyncError = ncclSystemError;
    if (lock.owns_lock()) lock.unlock();
    while (!anyAborted(ops)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return;
  }
  if (!exchange->complete) return;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (exchange->results[i]) writeTo(ops[i].recv, *exchange->results[i], ops[i].type);
  }
}

bool SimNcclApi::transfer(Exchange& exchange) {
  c10d::Store& store = *store_;
  const std::vector<Op>& ops = exchange.ops;
  exchange.results.assign(ops.size(), std::nullopt);
  // Post: every op's own contribution (and a collective's shape, see shapeOf).
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (op.collective()) store.set(shapeKey(op, op.comm->rank), shapeOf(op));
    if (!exchange.contributions[i]) continue;
    store.set(op.kind == Op::Send ? op.key : partKey(op, op.comm->rank), *exchange.contributions[i]);
  }
  // Collect: what each op needs from its peers.
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    SimComm& comm = *op.comm;
    int me = comm.rank, n = comm.size;
    auto valuesAt = [&](const std::string& key) -> std::optional<at::Tensor> {
      if (!arrived(store, comm, key)) return std::nullopt;
      std::vector<uint8_t> bytes = store.get(key);
      size_t count = bytes.size() / c10::elementSize(scalarTypeOf(op.type));
      return viewOf(bytes.data(), count, op.type).clone();
    };
    auto everyone = [&]() -> std::optional<std::vector<at::Tensor>> {
      std::vector<at::Tensor> parts;
      for (int r = 0; r < n; ++r) {
        auto p = valuesAt(partKey(op, r));
        if (!p) return std::nullopt;
        parts.push_back(*p);
      }
      return parts;
    };
    if (op.collective()) {
      for (int r = 0; r < n; ++r) {
        if (!arrived(store, comm, shapeKey(op, r))) return false;
        if (store.get(shapeKey(op, r)) == shapeOf(op)) continue;
        while (!comm.aborted.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // never matched
        return false;
      }
    }
    std::optional<at::Tensor>& result = exchange.results[i];
    switch (op.kind) {
      case Op::AllReduce:
      case Op::Reduce: {
        auto parts = everyone();
        if (!parts) return false;
        if (op.kind == Op::AllReduce || me == op.root) result = reduced(*parts, op);
        break;
      }
      case Op::AllGather: {
        auto parts = everyone();
        if (!parts) return false;
        result = at::cat(*parts);
        break;
      }
      case Op::ReduceScatter: {
        auto parts = everyone();
        if (!parts) return false;
        std::vector<at::Tensor> mine;
        for (auto& p : *parts) mine.push_back(p.narrow(0, static_cast<int64_t>(me * op.count), op.count));
        result = reduced(mine, op);
        break;
      }
      case Op::Broadcast: {
        result = valuesAt(partKey(op, op.root));
        if (!result) return false;
        break;
      }
      case Op::Recv: {
        result = valuesAt(op.key);
        if (!result) return false;
        store.set(op.key + "/ack", std::vector<uint8_t>{1});
        break;
      }
      case Op::Send:
        break;
    }
  }
  // A send completes once its receiver took the data.
  for (const Op& op : ops) {
    if (op.kind == Op::Send && !arrived(store, *op.comm, op.key + "/ack")) return false;
  }
  return true;
}

SimNcclApi::Op SimNcclApi::opOf(int kind, const void* send, void* recv, size_t count, ncclDataType_t type,
                                ncclRedOp_t redOp, int root, ncclComm_t comm, cudaStream_t stream, const char* call) {
  Op op{static_cast<Op::Kind>(kind), send, recv, count, type, redOp};
  op.root = root;
  op.comm = live(comm, call);
  op.stream = static_cast<SimStream*>(static_cast<void*>(stream));
  return op;
}

ncclResult_t SimNcclApi::allReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                                   ncclComm_t comm, cudaStream_t stream) {
  OneThreadAtATime inside(comm, "ncclAllReduce");
  return submit(opOf(Op::AllReduce, send, recv, count, type, op, 0, comm, stream, "ncclAllReduce"));
}

ncclResult_t SimNcclApi::broadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root,
                                   ncclComm_t comm, cudaStream_t stream) {
  OneThreadAtATime inside(comm, "ncclBroadcast");
  return submit(opOf(Op::Broadcast, send, recv, count, type, ncclSum, root, comm, stream, "ncclBroadcast"));
}

ncclResult_t SimNcclApi::reduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                                int root, ncclComm_t comm, cudaStream_t stream) {
  OneThreadAtATime inside(comm, "ncclReduce");
  return submit(opOf(Op::Reduce, send, recv, count, type, op, root, comm, stream, "ncclReduce"));
}

ncclResult_t SimNcclApi::allGather(const void* send, void* recv, size_t sendCount, ncclDataType_t type,
                                   ncclComm_t comm, cudaStream_t stream) {
  OneThreadAtATime inside(comm, "ncclAllGather");
  return submit(opOf(Op::AllGather, send, recv, sendCount, type, ncclSum, 0, comm, stream, "ncclAllGather"));
}

ncclResult_t SimNcclApi::reduceScatter(const void* send, void* recv, size_t recvCount, ncclDataType_t type,
                                       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  OneThreadAtATime inside(comm, "ncclReduceScatter");
  return submit(opOf(Op::ReduceScatter, send, recv, recvCount, type, op, 0, comm, stream, "ncclReduceScatter"));
}

ncclResult_t SimNcclApi::send(const void* buffer, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                              cudaStream_t stream) {
  OneThreadAtATime inside(comm, "ncclSend");
  return submit(opOf(Op::Send, buffer, nullptr, count, type, ncclSum, peer, comm, stream, "ncclSend"));
}

ncclResult_t SimNcclApi::recv(void* buffer, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                              cudaStream_t stream) {
  OneThreadAtATime inside(comm, "ncclRecv");
  return submit(opOf(Op::Recv, nullptr, buffer, count, type, ncclSum, peer, comm, stream, "ncclRecv"));
}

std::shared_ptr<const backends::NcclSeams> simulatedSeams(c10::intrusive_ptr<c10d::Store> store, Faults faults) {
  auto runtime = SimRuntime::instance();
  return std::make_shared<const backends::NcclSeams>(
      backends::NcclSeams{std::make_shared<SimNcclApi>(std::move(store), runtime, faults), runtime});
}

}  // namespace nccl_migrate::sim
