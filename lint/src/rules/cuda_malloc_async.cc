// NM301 cuda-malloc-async: the cudaMallocAsync allocator backend configured for a job.
#include <string>

#include "nccl_migrate/lint/rule.h"
#include "registry.h"
#include "setting_fixes.h"
#include "torch_names.h"

namespace nccl_migrate::lint {
namespace {

bool isAllocatorSettingsCall(const std::string& q) {
  return q == "torch.cuda.memory._set_allocator_settings" || q == "torch.cuda._set_allocator_settings" ||
         q == "torch._C._accelerator_setAllocatorSettings" || q == "torch._C._cuda_cudaCachingAllocator_set_allocator_settings";
}

constexpr const char* kWhy =
    "torch 2.15's rewritten NCCL backend always installs its caching-allocator registration hook (it registers "
    "allocator memory with NCCL), and its pairing with the cudaMallocAsync backend is unverified; test the job with "
    "this setting on torch 2.15 before upgrading, or drop it";

class CudaMallocAsync final : public Rule {
 public:
  const RuleInfo& info() const override { return info_; }

  void check(const SourceModel& model, const RuleContext&, std::vector<Finding>& out) const override {
    for (const Setting& s : model.settings) {
      if (!selectsCudaMallocAsync(s.value)) continue;
      Finding f = isAllocatorVariable(s.key)
                      ? finding(model, s.where, s.key + "=" + s.value + " selects the cudaMallocAsync allocator: " + kWhy)
                      // A job's own key or variable (a launcher config, ALLOC_CONF=...) carrying the value on.
                      : finding(model, s.where, s.key + ": \"" + s.value + "\" selects the cudaMallocAsync allocator "
                                                    "once it reaches PYTORCH_CUDA_ALLOC_CONF: " + kWhy);
      // Only the backend entry goes: expandable_segments and the other options keep working.
      f.fix = removeValueItems(s, selectsCudaMallocAsync, "Remove backend:cudaMallocAsync");
      out.push_back(std::move(f));
    }
    // The literal, wherever the string goes next (built in a variable, joined, passed on);
    // printed, logged and help texts only document it.
    for (const StringLiteral& str : model.strings) {
      if (str.documentation || !selectsCudaMallocAsync(str.value)) continue;
      out.push_back(finding(model, str.where, "\"" + str.value + "\" selects the cudaMallocAsync allocator once it "
                                                  "reaches PYTORCH_CUDA_ALLOC_CONF: " + kWhy));
    }
    for (const Call& call : model.calls) {
      if (!isAllocatorSettingsCall(call.qualifiedName)) continue;
      const Argument* value = call.positional(0);
      if (!value || !value->stringValue || !selectsCudaMallocAsync(*value->stringValue)) continue;
      out.push_back(finding(model, call.where, call.spelling + "(\"" + *value->stringValue +
                                                   "\") selects the cudaMallocAsync allocator: " + kWhy));
    }
  }

 private:
  RuleInfo info_{
      .code = "NM301",
      .slug = "cuda-malloc-async",
      .summary = "cudaMallocAsync allocator backend configured for a job that uses NCCL",
      .rationale = "torch 2.15's rewritten NCCL backend installs an allocator hook unconditionally (\"the allocator "
                   "registration hook remains unconditional because nccl2 needs it for custom mempool growth and "
                   "symmetric windows\") and registers caching-allocator segments with NCCL. Jobs that set "
                   "backend:cudaMallocAsync in PYTORCH_CUDA_ALLOC_CONF or PYTORCH_ALLOC_CONF run a different allocator "
                   "under that hook; the combination should be tested before the upgrade.",
      .example = "os.environ[\"PYTORCH_CUDA_ALLOC_CONF\"] = \"backend:cudaMallocAsync\"",
      .fix = "Test the job on torch 2.15 with this allocator, or use the native caching allocator (drop "
             "backend:cudaMallocAsync). `--fix --unsafe-fixes` drops the backend:cudaMallocAsync entry where the "
             "setting is written in a shell script, Dockerfile or configuration file, keeping the other entries "
             "(\"backend:cudaMallocAsync,expandable_segments:True\" becomes \"expandable_segments:True\") and "
             "removing the setting when it had no other. Unsafe: the job then runs torch's native caching allocator, "
             "whose memory use and fragmentation differ.",
      .fixSafety = FixSafety::Unsafe,
      .languages = {Language::Python, Language::Cpp, Language::Shell, Language::Dockerfile, Language::Config},
      .enabledByDefault = true,
      .triggers = {{.anyOf = {"cudaMallocAsync*"}}},
  };
};

}  // namespace

const Rule& cudaMallocAsyncRule() {
  static const CudaMallocAsync rule;
  return rule;
}

}  // namespace nccl_migrate::lint
